"""Charts: one module per view; each function takes a tidy frame and returns an altair chart."""
