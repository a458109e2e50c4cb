"""The backend-adaptor contract in domain terms, shared by its two sides: the dispatcher, which
calls adaptors, and every adaptor (`dxts.backends`), which answers.

`model` holds the dataclasses and enums both sides' logic works on (never a generated message);
`mapping` converts them to and from `dxts.v1` at each side's gRPC edge.
"""
