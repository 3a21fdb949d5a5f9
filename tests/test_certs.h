// A throwaway PKI for tests that speak TLS on loopback (etcd members, the
// webhook receiver): a CA, a server certificate for 127.0.0.1, ::1 and
// localhost, and a client certificate, written with the openssl command.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace keyauth::testing {

struct TestCerts {
    std::string ca_file;      // the CA that signed both certificates below
    std::string server_cert;  // for IP 127.0.0.1, IP ::1 and DNS localhost
    std::string server_key;
    std::string client_cert;
    std::string client_key;
};

// Writes the set into `dir`. False (and `error`) if openssl failed.
inline bool make_test_certs(const std::string &dir, TestCerts &out, std::string &error) {
    out = {dir + "/ca.pem", dir + "/server.pem", dir + "/server.key", dir + "/client.pem",
           dir + "/client.key"};
    {
        std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
                                              "extendedKeyUsage=serverAuth,clientAuth\n";
        std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    }
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string quiet = " >>" + dir + "/openssl.log 2>&1";
    std::vector<std::string> steps = {
        "openssl req -x509" + ec + " -keyout " + dir + "/ca.key -out " + out.ca_file +
            " -subj /CN=keyauth-test-ca -days 2",
        "openssl req" + ec + " -keyout " + out.server_key + " -out " + dir +
            "/server.csr -subj /CN=127.0.0.1",
        "openssl x509 -req -in " + dir + "/server.csr -CA " + out.ca_file + " -CAkey " + dir +
            "/ca.key -CAcreateserial -days 2 -extfile " + dir + "/server.ext -out " + out.server_cert,
        "openssl req" + ec + " -keyout " + out.client_key + " -out " + dir +
            "/client.csr -subj /CN=keyauth-test-client",
        "openssl x509 -req -in " + dir + "/client.csr -CA " + out.ca_file + " -CAkey " + dir +
            "/ca.key -CAcreateserial -days 2 -extfile " + dir + "/client.ext -out " + out.client_cert,
    };
    for (const std::string &step : steps) {
        if (std::system((step + quiet).c_str()) != 0) {
            error = "failed: " + step + " (see " + dir + "/openssl.log)";
            return false;
        }
    }
    return true;
}

}  // namespace keyauth::testing
