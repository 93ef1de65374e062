"""The reader's side of TensorViz: `tensorviz verify <model page or API URL>` checks a server's recording on the
reader's own machine, trusting nothing the server says but the files' hashes in its manifest (tensorviz/verify.py).

It needs Python, torch and this package, never Flask: it fetches over HTTP with the standard library, replays the
recipe in a process of its own (tensorviz/replay.py, the server's own recipe worker code from app/compute) and
compares by the server's own rules (app/domain/compare.py).
"""
