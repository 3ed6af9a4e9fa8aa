"""What cos knows of git: running it without locks (`command`), reading a repository's objects
without it (`objects`), and a checkout's layout and settings read from its files (`repo`)."""
