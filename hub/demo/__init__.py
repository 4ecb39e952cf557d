"""The built-in demo agent: an offline ACP agent that shows what the hub can display.

Run it as ``python -m hub.demo.agent [--protocol 1|2|auto]``; ``acp-hub demo`` starts the hub
with it. It needs no network and no API key.
"""
