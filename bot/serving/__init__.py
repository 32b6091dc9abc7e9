"""What front ends share to serve people safely: logins and their throttle, rate limits, capped request bodies."""
