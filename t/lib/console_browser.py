#!/usr/bin/python3
"""Drives the developer console page in real headless Chromium (Debian's
chromium + chromium-driver, python3-selenium) for t/25-console-page.t:

    console_browser.py BASE_URL TOKEN OTHER_TOKEN SCREENSHOT.png

signs in, checks the plan catalog, creates a key (the secret is shown once,
with the warning), calls the edge with it, revokes it through the page
(accepting the confirmation), calls the edge again, reads the audit list,
and takes a screenshot on the way. Then the roll prompt: an empty answer,
Cancel, a bad number and an unconfirmed grace of 0 roll nothing; a
confirmed 0 rolls. Then what a sign-out leaves: signs out with a secret on
screen, signs in again, makes a 401 (the token replaced by an unknown one)
with a secret on screen, and signs in as another account (OTHER_TOKEN).
Prints one JSON object of what it saw; exit 0 unless the browser itself
failed.
"""
import json
import sys
import urllib.error
import urllib.request

import headless_chromium
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

base, token, other_token, shot = sys.argv[1:5]
seen = {}


def edge_status(secret):
    req = urllib.request.Request(base + "/v1/ip/8.8.8.8", headers={"Authorization": "Bearer " + secret})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status
    except urllib.error.HTTPError as e:
        return e.code


def api_keys(tok):
    """The account's keys as the API lists them: {id: status}."""
    req = urllib.request.Request(base + "/v1/keys?limit=100", headers={"Authorization": "Bearer " + tok})
    with urllib.request.urlopen(req, timeout=10) as res:
        return {k["id"]: k["status"] for k in json.load(res)["keys"]}


def secret_state(d):
    """What the page holds of a secret: [box displayed, text in #secret]."""
    return [d.find_element(By.ID, "secret-box").is_displayed(),
            d.find_element(By.ID, "secret").get_attribute("textContent")]


def console_errors(d):
    """The browser console's errors since the last call (reading drains it)."""
    return [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]


def sign_in(d, tok):
    d.find_element(By.ID, "token").send_keys(tok)
    d.find_element(By.CSS_SELECTOR, "#sign-in-form button").click()
    wait.until(ec.visibility_of_element_located((By.ID, "create-form")))


def create_key(d, name):
    """Creates a key through the page; returns (id, secret) once it is listed."""
    d.find_element(By.ID, "create-name").send_keys(name)
    d.find_element(By.CSS_SELECTOR, "#create-form button").click()
    wait.until(ec.visibility_of_element_located((By.ID, "secret-box")))
    secret = d.find_element(By.ID, "secret").text
    row = wait.until(lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, "#key-rows tr")
                                if r.find_element(By.TAG_NAME, "td").text == name])[0]
    return row.get_attribute("data-key-id"), secret


def roll_answer(d, key_id, answer, confirm=None):
    """Clicks Roll on the key and answers the prompt (None: Cancel); when a
    confirmation follows, returns its text, accepted if confirm is true."""
    row = d.find_element(By.CSS_SELECTOR, '#key-rows tr[data-key-id="%s"]' % key_id)
    row.find_element(By.XPATH, ".//button[text()='Roll']").click()
    prompt = wait.until(ec.alert_is_present())
    if answer is None:
        prompt.dismiss()
        return None
    if answer:
        prompt.send_keys(answer)
    prompt.accept()
    if confirm is None:
        return None
    box = wait.until(ec.alert_is_present())
    text = box.text
    box.accept() if confirm else box.dismiss()
    return text


driver = headless_chromium.start("1400,1100")
# The page re-renders its key rows after each call: an element found in one
# rendering may be gone when it is read, so a condition that meets a stale
# element is tried again rather than failing (seen under make test-stress).
wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))
try:
    driver.get(base + "/console/")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#plan-rows tr"))
    seen["plans"] = len(driver.find_elements(By.CSS_SELECTOR, "#plan-rows tr"))
    seen["fx"] = driver.find_element(By.ID, "fx").text
    seen["app_hidden_before_sign_in"] = not driver.find_element(By.ID, "app").is_displayed()

    sign_in(driver, token)
    seen["token_in_session_storage"] = driver.execute_script(
        "return sessionStorage.getItem('keyauthConsoleToken') === arguments[0]", token)
    seen["token_in_local_storage"] = driver.execute_script("return localStorage.length") != 0
    seen["cookies"] = len(driver.get_cookies())

    driver.find_element(By.ID, "create-name").send_keys("from the browser")
    rate = driver.find_element(By.ID, "create-rate")
    rate.clear()
    rate.send_keys("120")
    driver.find_element(By.ID, "create-ips").send_keys("127.0.0.0/8, 10.0.0.0/8")
    driver.find_element(By.CSS_SELECTOR, "#create-form button").click()
    wait.until(ec.visibility_of_element_located((By.ID, "secret-box")))
    secret = driver.find_element(By.ID, "secret").text
    seen["secret_prefix"] = secret[:3]
    seen["warning"] = driver.find_element(By.CSS_SELECTOR, "#secret-box .warning").text
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#key-rows tr"))
    row = driver.find_element(By.CSS_SELECTOR, "#key-rows tr")
    seen["row"] = [td.text for td in row.find_elements(By.TAG_NAME, "td")][:5]
    seen["edge_after_create"] = edge_status(secret)
    driver.save_screenshot(shot)

    driver.find_element(By.ID, "dismiss-secret").click()
    seen["secret_gone"] = driver.find_element(By.ID, "secret").get_attribute("textContent") == ""

    row.find_element(By.XPATH, ".//button[text()='Revoke']").click()
    alert = wait.until(ec.alert_is_present())
    seen["confirmation"] = alert.text
    alert.accept()
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#key-rows tr td.status-revoked"))
    seen["status_after_revoke"] = driver.find_element(By.CSS_SELECTOR, "#key-rows tr td.status-revoked").text
    seen["edge_after_revoke"] = edge_status(secret)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit-rows tr")) >= 2)
    seen["audit"] = [tr.find_elements(By.TAG_NAME, "td")[2].text
                     for tr in driver.find_elements(By.CSS_SELECTOR, "#audit-rows tr")]
    seen["page_text_has_secret"] = secret in driver.find_element(By.TAG_NAME, "body").text

    # The roll prompt: only a deliberate, valid answer rolls.
    roll_id, _ = create_key(driver, "to roll")
    driver.find_element(By.ID, "dismiss-secret").click()
    before = api_keys(token)
    unrolled = {}
    for name, answer in (("cancel", None), ("empty", ""), ("blank", "   "), ("word", "soon"),
                         ("fraction", "1.5"), ("negative", "-1"), ("too_long", "604801"), ("exponent", "1e3")):
        roll_answer(driver, roll_id, answer)
        unrolled[name] = {"keys_unchanged": api_keys(token) == before,
                          "secret": secret_state(driver),
                          "message": driver.find_element(By.ID, "message").text}
    seen["unrolled"] = unrolled
    seen["grace0_confirmation"] = roll_answer(driver, roll_id, "0", confirm=False)
    seen["grace0_declined_keys_unchanged"] = api_keys(token) == before
    seen["grace0_declined_secret"] = secret_state(driver)
    roll_answer(driver, roll_id, "0", confirm=True)
    wait.until(ec.visibility_of_element_located((By.ID, "secret-box")))
    rolled_secret = driver.find_element(By.ID, "secret").text
    after = api_keys(token)
    seen["grace0_confirmed"] = {"old_status": after.get(roll_id), "new_keys": len(after) - len(before),
                                "secret_prefix": rolled_secret[:3]}

    # A rolled key in its grace: Edit offers no expiry (the API refuses to
    # move a rolled key's expiry, which would make it live again).
    graced_id, _ = create_key(driver, "graced")
    driver.find_element(By.ID, "dismiss-secret").click()
    roll_answer(driver, graced_id, "600")
    wait.until(ec.visibility_of_element_located((By.ID, "secret-box")))
    driver.find_element(By.ID, "dismiss-secret").click()
    row = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#key-rows tr[data-key-id="%s"]' % graced_id))
    wait.until(lambda d: not d.find_element(By.CSS_SELECTOR, '#key-rows tr[data-key-id="%s"]' % graced_id)
               .find_elements(By.XPATH, ".//button[text()='Roll']"))
    driver.find_element(By.CSS_SELECTOR, '#key-rows tr[data-key-id="%s"]' % graced_id) \
        .find_element(By.XPATH, ".//button[text()='Edit']").click()
    wait.until(ec.visibility_of_element_located((By.ID, "edit-dialog")))
    seen["rolled_edit"] = {"expires_enabled": driver.find_element(By.ID, "edit-expires").is_enabled(),
                           "never_enabled": driver.find_element(By.ID, "edit-never").is_enabled(),
                           "note": driver.find_element(By.ID, "edit-rolled").text}
    driver.find_element(By.CSS_SELECTOR, "#edit-form button[value='cancel']").click()

    # Signing out with a secret on screen leaves nothing of it.
    driver.find_element(By.ID, "sign-out").click()
    seen["token_after_sign_out"] = driver.execute_script("return sessionStorage.getItem('keyauthConsoleToken')")
    seen["secret_after_sign_out"] = secret_state(driver)
    seen["key_rows_after_sign_out"] = len(driver.find_elements(By.CSS_SELECTOR, "#key-rows tr"))
    sign_in(driver, token)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#key-rows tr"))
    seen["secret_after_sign_in_again"] = secret_state(driver)

    # A 401 (the token no longer valid) with a secret on screen: the same.
    _, secret_401 = create_key(driver, "before the 401")
    errors = console_errors(driver)
    driver.execute_script("sessionStorage.setItem('keyauthConsoleToken', arguments[0])",
                          "kac_" + "0" * 43)
    driver.find_element(By.ID, "keys-first").click()
    wait.until(ec.visibility_of_element_located((By.ID, "sign-in")))
    wait.until(lambda d: d.find_element(By.ID, "message").text)
    seen["after_401"] = {"secret": secret_state(driver),
                         "app_displayed": driver.find_element(By.ID, "app").is_displayed(),
                         "token": driver.execute_script("return sessionStorage.getItem('keyauthConsoleToken')"),
                         "message": driver.find_element(By.ID, "message").text}
    # the 401 itself is the one error the browser logs for it
    errors += [e for e in console_errors(driver) if "status of 401" not in e]

    # Another account in the same tab sees no secret and no key of the first.
    sign_in(driver, other_token)
    # its trail has its account.create: once listed, the page has loaded it
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#audit-rows tr"))
    body = driver.find_element(By.TAG_NAME, "body").get_attribute("textContent")
    seen["other_account"] = {"secret": secret_state(driver),
                             "key_rows": len(driver.find_elements(By.CSS_SELECTOR, "#key-rows tr")),
                             "sees_a_secret": any(s in body for s in (secret, rolled_secret, secret_401))}
    driver.find_element(By.ID, "sign-out").click()
    seen["console_errors"] = errors + console_errors(driver)
finally:
    driver.quit()
print(json.dumps(seen))
