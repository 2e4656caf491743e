"""The experiments of arXiv:2312.10794, one script each (run them with ``meanfield figures``)."""
