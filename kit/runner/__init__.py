"""`kit run`: plan the cells, run them one by one, journal, resume, bundle."""
