#!/usr/bin/python3
"""Drives the developer console page in real headless Chromium (Debian's
chromium + chromium-driver, python3-selenium) for t/25-console-page.t:

    console_browser.py BASE_URL TOKEN SCREENSHOT.png

signs in, checks the plan catalog, creates a key (the secret is shown once,
with the warning), calls the edge with it, revokes it through the page
(accepting the confirmation), calls the edge again, reads the audit list,
signs out, and takes a screenshot on the way. Prints one JSON object of what
it saw; exit 0 unless the browser itself failed.
"""
import json
import sys
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

base, token, shot = sys.argv[1:4]
seen = {}


def edge_status(secret):
    req = urllib.request.Request(base + "/v1/ip/8.8.8.8", headers={"Authorization": "Bearer " + secret})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status
    except urllib.error.HTTPError as e:
        return e.code


options = webdriver.ChromeOptions()
for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1400,1100", "--no-first-run", "--disable-extensions"):
    options.add_argument(arg)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
wait = WebDriverWait(driver, 30)
try:
    driver.get(base + "/console/")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#plan-rows tr"))
    seen["plans"] = len(driver.find_elements(By.CSS_SELECTOR, "#plan-rows tr"))
    seen["fx"] = driver.find_element(By.ID, "fx").text
    seen["app_hidden_before_sign_in"] = not driver.find_element(By.ID, "app").is_displayed()

    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#sign-in-form button").click()
    wait.until(ec.visibility_of_element_located((By.ID, "create-form")))
    seen["token_in_session_storage"] = driver.execute_script(
        "return sessionStorage.getItem('keyauthConsoleToken') === arguments[0]", token)
    seen["token_in_local_storage"] = driver.execute_script("return localStorage.length") != 0
    seen["cookies"] = len(driver.get_cookies())

    driver.find_element(By.ID, "create-name").send_keys("from the browser")
    rate = driver.find_element(By.ID, "create-rate")
    rate.clear()
    rate.send_keys("120")
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

    driver.find_element(By.ID, "sign-out").click()
    seen["token_after_sign_out"] = driver.execute_script("return sessionStorage.getItem('keyauthConsoleToken')")
    seen["console_errors"] = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
finally:
    driver.quit()
print(json.dumps(seen))
