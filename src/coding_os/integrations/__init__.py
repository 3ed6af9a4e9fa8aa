"""cos as the session store of Python agent runtimes (DESIGN.md §8; docs/integrations.md).

Each module adapts one runtime's own store interface to cos's sessions; each imports its SDK
only when used (`pip install 'coding-os[claude-sdk]'`, `[openai-agents]`, `[langgraph]`).
"""
