"""The hooks: what each event of Claude Code and Codex means for cos (DESIGN.md §3.6, §5, §9).

`events.handle` is the one entry (`cos hook` calls it); `context` is what a fire knows and
answers, `sessions` the panel lifecycle, `checkpoint` the automatic checkpoints, `gates` the
policy gates on tool calls.
"""
