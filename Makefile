# keyauth: make deps | make | make test | make test-stress | make run | make bench | make clean
# Every target installs what a fresh Debian bookworm machine lacks (make deps).

SHELL      := /bin/bash
BUILD      := build
NGX_SRC    := /usr/share/nginx/src
NGX_BUILD  := $(CURDIR)/$(BUILD)/nginx
MODULE     := $(BUILD)/ngx_http_keyauth_module.so

CXX        ?= g++
CXXSTD     := -std=c++17
WARN       := -Wall -Wextra -Werror
INCS       := -Isrc/core -Ilmdb_schema -Iadmin
# -MMD -MP: each object lists the headers it read (build/**/*.d, included below).
DEPFLAGS   := -MMD -MP
CXXFLAGS   := $(CXXSTD) -O2 -g -fPIC $(WARN) $(INCS) $(DEPFLAGS)
SAN_FLAGS  := $(DEPFLAGS) $(CXXSTD) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=all $(WARN) $(INCS)
LIBS       := -llmdb -lcrypto -lz
GTEST_LIBS := -lgtest -lgtest_main -pthread

# Same hardening as Debian's own nginx build (nginx -V).
NGX_CC_OPT := -g -O2 -fstack-protector-strong -Wformat -Werror=format-security \
              -fPIC -D_FORTIFY_SOURCE=2 -Wextra
NGX_LD_OPT := -Wl,-z,relro -Wl,-z,now -fPIC

CORE_SRCS  := $(wildcard src/core/*.cc)
# keyauthd's own sources; the rest of admin/ is the library both programs share.
KEYAUTHD_SRCS := admin/keyauthd.cc admin/console_server.cc
STORE_SRCS := $(filter-out admin/keyauthctl.cc $(KEYAUTHD_SRCS),$(wildcard admin/*.cc))
TEST_SRCS  := $(wildcard tests/*.cc)
CORE_OBJS  := $(CORE_SRCS:%.cc=$(BUILD)/obj/%.o)
STORE_OBJS := $(STORE_SRCS:%.cc=$(BUILD)/obj/%.o)
TEST_OBJS  := $(TEST_SRCS:%.cc=$(BUILD)/obj/%.o)
SAN_OBJS   := $(CORE_SRCS:%.cc=$(BUILD)/san/%.o) $(STORE_SRCS:%.cc=$(BUILD)/san/%.o) \
              $(TEST_SRCS:%.cc=$(BUILD)/san/%.o)
# The module is built by nginx's own make, which does not see header changes.
MODULE_HEADERS := $(wildcard src/core/*.h lmdb_schema/*.h)
NGX_DEPS   := config $(wildcard src/*.c src/*.h) $(CORE_SRCS) $(MODULE_HEADERS)

APT_PKGS   := build-essential nginx-core nginx-dev libpcre2-dev zlib1g-dev libssl-dev \
              liblmdb-dev liblmdb++-dev lmdb-utils nlohmann-json3-dev libgtest-dev \
              libboost-dev perl curl wrk clang libclang-rt-14-dev gdb

.PHONY: all deps module test test-stress unit unit-asan e2e e2e-asan soak run bench fuzz fuzz-short clean

# The whole end-to-end suite again against an ASan+UBSan build of the module
# (nginx preloads the sanitizer runtime), keyauthd and keyauthctl.
ASAN_DIR     := $(BUILD)/asan
NGX_ASAN     := $(CURDIR)/$(BUILD)/nginx-asan
SAN_CC_OPT   := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=all -fPIC -Wextra
SAN_TOOLS    := $(ASAN_DIR)/keyauthctl $(ASAN_DIR)/keyauthd
SAN_LIB_OBJS := $(CORE_SRCS:%.cc=$(BUILD)/san/%.o) $(STORE_SRCS:%.cc=$(BUILD)/san/%.o)

# libFuzzer targets (clang): every parser that sees untrusted bytes.
FUZZ_CXX     := clang++
FUZZ_FLAGS   := $(DEPFLAGS) -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=all $(WARN) $(INCS)
FUZZERS      := $(patsubst fuzz/%.cc,$(BUILD)/fuzz/%,$(wildcard fuzz/*.cc))
FUZZ_OBJS    := $(CORE_SRCS:%.cc=$(BUILD)/fuzzobj/%.o) $(STORE_SRCS:%.cc=$(BUILD)/fuzzobj/%.o)
FUZZ_SECONDS ?= 60

# Objects reached through pattern chains are not to be deleted as intermediates.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

all: deps $(MODULE) $(BUILD)/keyauthctl $(BUILD)/keyauthd

deps:
	@missing=$$(for p in $(APT_PKGS); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && \
	  apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi

module: deps $(MODULE)

$(MODULE): $(NGX_DEPS)
	@mkdir -p $(NGX_BUILD)
	@source $(NGX_SRC)/conf_flags && cd $(NGX_SRC) && \
	  ./configure "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="$(NGX_CC_OPT)" \
	    --with-ld-opt="$(NGX_LD_OPT)" --add-dynamic-module=$(CURDIR) \
	    --builddir=$(NGX_BUILD) > $(NGX_BUILD)/configure.log 2>&1 \
	  || { cat $(NGX_BUILD)/configure.log; exit 1; }
	$(MAKE) -s -f $(NGX_BUILD)/Makefile -C $(NGX_SRC) modules
	@# a new inode: a running nginx keeps its mapping of the old module
	cp $(NGX_BUILD)/ngx_http_keyauth_module.so $@.tmp && mv -f $@.tmp $@

$(BUILD)/obj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(SAN_FLAGS) -c $< -o $@

$(BUILD)/fuzzobj/%.o: %.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/%: fuzz/%.cc $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LIBS)

# Each fuzzer runs FUZZ_SECONDS from its seeds in fuzz/corpus; what it learns
# stays in build/fuzz-corpus, crashes land in build/fuzz-crashes.
fuzz: deps $(FUZZERS)
	@mkdir -p $(BUILD)/fuzz-crashes
	@set -e; for f in $(FUZZERS); do n=$$(basename $$f); t=$${n#fuzz_}; \
	  mkdir -p $(BUILD)/fuzz-corpus/$$t; echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=0 \
	      -artifact_prefix=$(BUILD)/fuzz-crashes/$$n- \
	      $(BUILD)/fuzz-corpus/$$t fuzz/corpus/$$t 2>$(BUILD)/fuzz-$$n.log \
	    || { tail -40 $(BUILD)/fuzz-$$n.log; exit 1; }; \
	  grep -E '^Done|DONE' $(BUILD)/fuzz-$$n.log | tail -1; done

fuzz-short:
	$(MAKE) fuzz FUZZ_SECONDS=5

$(ASAN_DIR)/ngx_http_keyauth_module.so: $(NGX_DEPS)
	@mkdir -p $(NGX_ASAN) $(ASAN_DIR)
	@source $(NGX_SRC)/conf_flags && cd $(NGX_SRC) && \
	  ./configure "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="$(SAN_CC_OPT)" \
	    --with-ld-opt="-fsanitize=address,undefined" --add-dynamic-module=$(CURDIR) \
	    --builddir=$(NGX_ASAN) > $(NGX_ASAN)/configure.log 2>&1 \
	  || { cat $(NGX_ASAN)/configure.log; exit 1; }
	$(MAKE) -s -f $(NGX_ASAN)/Makefile -C $(NGX_SRC) modules
	cp $(NGX_ASAN)/ngx_http_keyauth_module.so $@.tmp && mv -f $@.tmp $@

$(ASAN_DIR)/keyauthctl: $(BUILD)/san/admin/keyauthctl.o $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -fsanitize=address,undefined -o $@ $^ $(LIBS)

$(ASAN_DIR)/keyauthd: $(KEYAUTHD_SRCS:%.cc=$(BUILD)/san/%.o) $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -fsanitize=address,undefined -o $@ $^ $(LIBS) -pthread

e2e-asan: deps $(ASAN_DIR)/ngx_http_keyauth_module.so $(SAN_TOOLS)
	KEYAUTH_BUILD=$(ASAN_DIR) prove -r -j2 t/

$(BUILD)/keyauthctl: $(BUILD)/obj/admin/keyauthctl.o $(STORE_OBJS) $(CORE_OBJS)
	$(CXX) -o $@ $^ $(LIBS)

$(BUILD)/keyauthd: $(KEYAUTHD_SRCS:%.cc=$(BUILD)/obj/%.o) $(STORE_OBJS) $(CORE_OBJS)
	$(CXX) -o $@ $^ $(LIBS) -pthread

$(BUILD)/unit_tests: $(TEST_OBJS) $(STORE_OBJS) $(CORE_OBJS)
	$(CXX) -o $@ $^ $(LIBS) $(GTEST_LIBS)

$(BUILD)/unit_tests_asan: $(SAN_OBJS)
	$(CXX) -fsanitize=address,undefined -o $@ $^ $(LIBS) $(GTEST_LIBS)

unit: deps $(BUILD)/unit_tests
	$(BUILD)/unit_tests --gtest_brief=1

unit-asan: deps $(BUILD)/unit_tests_asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(BUILD)/unit_tests_asan --gtest_brief=1

e2e: all
	prove -r -j2 t/

TEST_BUILDS := $(MODULE) $(BUILD)/keyauthctl $(BUILD)/keyauthd $(BUILD)/unit_tests \
               $(BUILD)/unit_tests_asan $(FUZZERS) $(ASAN_DIR)/ngx_http_keyauth_module.so $(SAN_TOOLS)
TEST_SUITES := unit unit-asan fuzz-short e2e e2e-asan

# Builds in parallel, then runs the suites one after the other.
test: deps
	$(MAKE) -j2 $(TEST_BUILDS)
	$(MAKE) $(TEST_SUITES)

# The suites of make test on a busy machine: STRESS_LOAD (3) CPU-bound loops
# run beside them, for STRESS_ROUNDS (1) rounds; every suite runs in every
# round (make -k), and it fails if any round failed. The loops are killed when
# it ends, however it ends: a trap, and each loop stops by itself once this
# recipe's shell or make is gone (kill -9, or make killed alone).
STRESS_ROUNDS ?= 1
STRESS_LOAD   ?= 3

test-stress: deps
	$(MAKE) -j2 $(TEST_BUILDS)
	@hogs=; trap 'kill $$hogs 2>/dev/null' EXIT; trap 'exit 130' INT TERM HUP; \
	for i in $$(seq $(STRESS_LOAD)); do \
	  sh -c 'while kill -0 "$$1" "$$2" 2>/dev/null; do :; done' busy-loop $$$$ $$PPID & hogs="$$hogs $$!"; \
	done; \
	failed=; \
	for r in $$(seq $(STRESS_ROUNDS)); do \
	  echo "test-stress: round $$r of $(STRESS_ROUNDS), $(STRESS_LOAD) busy loops beside it:$$hogs"; \
	  $(MAKE) --no-print-directory -k $(TEST_SUITES) || failed="$$failed $$r"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-stress: FAILED in round(s)$$failed of $(STRESS_ROUNDS)"; exit 1; fi; \
	echo "test-stress: all $(STRESS_ROUNDS) round(s) passed"

run: all
	@nginx_conf/run-demo.sh

# Not part of make test: SOAK_SECONDS (600) of load with keys churning.
soak: all
	SOAK_SECONDS=$${SOAK_SECONDS:-600} prove -v soak/

bench: all
	@bench/run.sh

clean:
	rm -rf $(BUILD)
