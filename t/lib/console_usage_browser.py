#!/usr/bin/python3
"""Reads the developer console page's usage charts in real headless Chromium
(Debian's chromium + chromium-driver, python3-selenium) for
t/32-console-usage.t:

    console_usage_browser.py BASE_URL TOKEN KEY_ID SCREENSHOT.png

signs in, waits for the Usage section to be drawn, and reads what the page
drew: each chart's uPlot data arrays (window.keyauthUsageCharts), the API
answer the page drew it from (its range), the canvas' size, the table
beside it, and the quota gauge, and takes the screenshot of the Usage
section. Then chooses KEY_ID in the select and reads the charts again,
signs out (the charts go with the account), and prints one
JSON object of what it saw; exit 0 unless the browser itself failed.
"""
import json
import sys

import headless_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

base, token, key_id, shot = sys.argv[1:5]
seen = {}

# What the page drew, read from the page itself: the uPlot instance's own
# data arrays, the canvas, and the accessible table beside each chart.
READ_CHARTS = """
const charts = window.keyauthUsageCharts;
const out = {};
for (const [name, table] of [['daily', 'table-daily'], ['hourly', 'table-hourly']]) {
  const c = charts[name];
  const canvas = c.chart.root.querySelector('canvas');
  const rect = canvas.getBoundingClientRect();
  const rows = [...document.querySelectorAll('#' + table + ' tbody tr')].map((tr) =>
    [tr.querySelector('th').dataset.start, tr.querySelector('th').textContent]
      .concat([...tr.querySelectorAll('td')].map((td) => td.textContent)));
  const total = [...document.querySelectorAll('#' + table + ' tfoot td')].map((td) => td.textContent);
  out[name] = {
    data: c.chart.data.map((a) => Array.from(a)),
    seriesLabels: c.chart.series.map((s) => s.label),
    granularity: c.usage.granularity, from: c.usage.from, to: c.usage.to,
    keyId: c.keyId,
    canvas: {width: canvas.width, height: canvas.height, shownWidth: rect.width, shownHeight: rect.height},
    table: rows, total: total,
    range: document.getElementById('range-' + name).textContent,
  };
}
return out;
"""


def console_errors(d):
    """The browser console's errors since the last call (reading drains it)."""
    return [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]


def drawn_for(d, key):
    """Waits until the Usage section shows key ('' the account), then reads it."""
    wait.until(lambda d: d.execute_script(
        "const s = document.getElementById('usage');"
        "return s.dataset.state === 'ready' && s.dataset.keyId === arguments[0]", key))
    return d.execute_script(READ_CHARTS)


driver = headless_chromium.start("1280,1000")
wait = WebDriverWait(driver, 30)
try:
    driver.get(base + "/console/")
    seen["uplot_loaded"] = driver.execute_script("return typeof uPlot === 'function'")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#sign-in-form button").click()
    wait.until(ec.visibility_of_element_located((By.ID, "usage")))
    seen["account"] = drawn_for(driver, "")
    seen["gauge"] = {
        "text": driver.find_element(By.ID, "quota-text").text,
        "meter_shown": driver.find_element(By.ID, "quota-meter").is_displayed(),
        "meter_value": driver.execute_script("return document.getElementById('quota-meter').value"),
        "meter_max": driver.execute_script("return document.getElementById('quota-meter').max"),
    }

    driver.execute_script("document.getElementById('usage').scrollIntoView()")
    driver.save_screenshot(shot)

    # One key instead of the account: chosen in the select (its options are
    # the keys the page lists).
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#usage-key option[value="%s"]' % key_id))
    select = Select(driver.find_element(By.ID, "usage-key"))
    seen["select_options"] = [o.get_attribute("value") for o in select.options]
    seen["select_label"] = driver.find_element(By.CSS_SELECTOR, '#usage-key option[value="%s"]' % key_id).text
    select.select_by_value(key_id)
    seen["key"] = drawn_for(driver, key_id)

    # Signing out takes the charts away with the rest of the account.
    driver.find_element(By.ID, "sign-out").click()
    seen["after_sign_out"] = driver.execute_script(
        "return {charts: window.keyauthUsageCharts, canvases: document.querySelectorAll('#usage canvas').length,"
        " rows: document.querySelectorAll('#usage tbody tr').length,"
        " options: document.querySelectorAll('#usage-key option').length,"
        " quota: document.getElementById('quota-text').textContent}")
    seen["console_errors"] = console_errors(driver)
finally:
    driver.quit()
print(json.dumps(seen))
