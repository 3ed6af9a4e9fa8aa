"""Sessions (DESIGN.md §4): canonical transcripts, and (to come) the index, importers and resume.

Modules are imported by name (`from coding_os.sessions import transcript`); this package imports
nothing itself, so a hook that appends to a transcript pays only for what it uses.
"""
