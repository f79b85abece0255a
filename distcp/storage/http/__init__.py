"""HTTP/1.1 of pydistcp's own, where the client's CPU sets a copy's pace (driver and executor).

The kept connections (``wire``) and many requests from one thread (``pipelined``). The
stores' modules make the requests and judge the answers (S3's signed requests, GCS's
media reads).
"""
