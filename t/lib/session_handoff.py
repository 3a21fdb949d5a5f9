#!/usr/bin/python3
"""The console session hand-off in real headless Chromium, for
t/35-admin-api.t:

    session_handoff.py LOGIN_URL

opens LOGIN_URL (the business's backend, docs/examples/console_login.py),
which answers with a redirect to the console page carrying #session=...;
waits until the page is signed in, and prints one JSON object of what the
tab holds then: the address bar, whether the token is in sessionStorage,
and every URL of the tab's history it can see. Exit 0 unless the browser
itself failed.
"""
import json
import sys

import headless_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

login = sys.argv[1]
d = headless_chromium.start("1000,800")
try:
    d.get(login)
    WebDriverWait(d, 20).until(lambda d: d.find_element(By.ID, "app").is_displayed())
    seen = {
        "href": d.current_url,
        "hash": d.execute_script("return location.hash"),
        "stored": d.execute_script("return (sessionStorage.getItem('keyauthConsoleToken') || '').slice(0, 4)"),
        "historyLength": d.execute_script("return history.length"),
        "title": d.title,
    }
    # back through the history: no entry holds the token
    urls = [d.current_url]
    for _ in range(3):
        d.back()
        urls.append(d.current_url)
    seen["history"] = urls
    print(json.dumps(seen))
finally:
    d.quit()
