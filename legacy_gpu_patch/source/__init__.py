"""Getting the pinned source: git mirrors, submodules from the mirror cache, sdists, the download cache."""
