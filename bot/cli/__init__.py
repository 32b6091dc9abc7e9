"""The command-line front end: chat, search, eval and calibrate."""
