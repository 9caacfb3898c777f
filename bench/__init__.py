"""einmal's throughput benchmark: `make bench`, or `python -m bench --help`."""
