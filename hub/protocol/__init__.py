"""The sans-I/O ACP protocol core.

Nothing in this package performs I/O or imports anyio, starlette, websockets or redis
(``tests/protocol/test_purity.py`` enforces it). It turns bytes into messages and
messages into bytes, translates between ACP v1 and v2, folds a session's updates into
its state and compacts that state back into the fewest updates that rebuild it.
"""
