"""`cos acp` (DESIGN.md §12.1): cos as an Agent Client Protocol agent on stdio. server.py is
the JSON-RPC side (the ACP SDK's connection over a bounded stdio transport) and the relay of a
background job's events; mapping.py turns §7 events into ACP updates; history.py lists and
replays sessions; commands.py serves the slash commands and `_cos/rewind`."""
