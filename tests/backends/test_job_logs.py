"""A job's logs are read with a server-side cap: however many bytes a caller asks for, an
adaptor reads (and answers) no more than MAX_LOG_BYTES of each stream, from its end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dxts.backends.edge.servicer import AdaptorServicer
from dxts.backends.logic.adaptor import directory_logs
from dxts.core.adaptor.model import DEFAULT_LOG_BYTES, MAX_LOG_BYTES, JobLogs
from dxts.v1 import backend_pb2


def test_a_huge_ask_reads_only_the_cap_from_the_end(tmp_path: Path) -> None:
    (tmp_path / "out").write_bytes(b"a" * (3 * MAX_LOG_BYTES) + b"the end")
    logs = directory_logs(tmp_path, "out", "err", 2**62)
    assert len(logs.stdout) == MAX_LOG_BYTES and logs.stdout.endswith("the end")
    assert logs.truncated and logs.stderr == ""
    assert len(directory_logs(tmp_path, "out", "err", 0).stdout) == DEFAULT_LOG_BYTES


class Asked:
    """An adaptor that notes how much a GetLogs asked it for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    async def logs(self, identifier: str, max_bytes: int) -> JobLogs:
        self.asked.append(max_bytes)
        return JobLogs()


async def test_the_adaptor_service_caps_what_it_asks_its_adaptor_for() -> None:
    adaptor = Asked()
    servicer = AdaptorServicer(adaptor)  # type: ignore[arg-type]
    context: Any = None
    for asked in (2**62, -5, 100):
        await servicer.GetLogs(backend_pb2.GetLogsRequest(identifier="j", max_bytes=asked), context)
    assert adaptor.asked == [MAX_LOG_BYTES, 0, 100]
