"""Hostile but harmless: hostile_setsid_db.py hidden behind exec(base64...), so none of its text
is in the source (the test writes the encoded payload over __PAYLOAD__)."""
import base64

exec(base64.b64decode("__PAYLOAD__").decode())
