"""What front ends share to serve people safely: logins and their throttle, rate limits, capped bodies, bounded logs."""
