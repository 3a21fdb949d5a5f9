"""Debian's chromium, headless, driven by chromedriver through selenium: the
one way the console page's browser tests start it."""
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def start(window_size):
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=" + window_size, "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
