#!/usr/bin/python3
# Your backend's "open the API console" link: your own login says which
# customer this is; keyauth mints a console session for the customer's
# account (found by your own id, its externalId) and the browser goes to the
# console with it in the URL fragment, which no server ever sees. Needs an
# admin token with accounts:read and sessions:write.
import json, os, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

ADMIN, TOKEN, CONSOLE = os.environ["KEYAUTH_ADMIN_URL"], os.environ["KEYAUTH_ADMIN_TOKEN"], os.environ["CONSOLE_URL"]

def admin(method, path):
    req = urllib.request.Request(ADMIN + path, method=method, headers={"Authorization": "Bearer " + TOKEN})
    return json.load(urllib.request.urlopen(req, timeout=10))

class OpenConsole(BaseHTTPRequestHandler):
    def do_GET(self):
        customer = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["customer"][0]  # your login's, in real life
        account = admin("GET", "/v1/admin/accounts?externalId=" + urllib.parse.quote(customer))["accounts"][0]["id"]
        session = admin("POST", "/v1/admin/accounts/" + account + "/sessions")
        self.send_response(303)
        self.send_header("Location", CONSOLE + "#session=" + session["token"])
        self.end_headers()

HTTPServer(("127.0.0.1", int(os.environ["PORT"])), OpenConsole).serve_forever()
