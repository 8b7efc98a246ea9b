# (filled in by its part's work)
