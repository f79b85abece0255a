"""HTTP/1.1 of pydistcp's own, for the requests whose client CPU sets a copy's pace: the
kept connections (``wire``) and many requests from one thread (``pipelined``). The
stores' modules make the requests and judge the answers (S3's signed requests, GCS's
media reads)."""
