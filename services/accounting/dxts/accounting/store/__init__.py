"""Every database access of the accounting service, by concern: `counts`, `logs`, `health`.

The counters are read through their construct (`Counter.read`: one statement, exact); the
statements written here are reads of the tables accounting owns (journals, counters, logs) and
of the server's InnoDB metrics. Accounting writes nothing with its own SQL: counter corrections
go through `Counter.rebuild` and log rows through `dxts.core.logs`.
"""
