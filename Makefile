# keyauth. `make help` lists the targets. `make` only builds (it never
# installs); `make deps` installs what a fresh Debian bookworm machine lacks,
# and `make test`, `make run`, `make bench` and `make soak` call it first.

SHELL      := /bin/bash
# The dependency files included below name targets of their own: without
# this, the first of them would become what a plain `make` builds.
.DEFAULT_GOAL := all
BUILD      := build
NGX_SRC    := /usr/share/nginx/src
NGX_BUILD  := $(CURDIR)/$(BUILD)/nginx
MODULE     := $(BUILD)/ngx_http_keyauth_module.so

CXX        ?= g++
CXXSTD     := -std=c++17
WARN       := -Wall -Wextra -Werror
# Every library with a pkg-config file is asked for its flags (gtest's
# defines included). Boost (Beast, Asio) is header-only and has none.
PKGS       := lmdb libssl libcrypto zlib nlohmann_json libcurl hiredis
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LIBS       := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
GTEST_CFLAGS := $(shell pkg-config --cflags gtest_main 2>/dev/null)
GTEST_LIBS := $(shell pkg-config --libs gtest_main 2>/dev/null)
# The admin library's headers are visible to every program; a program's own
# headers only to itself (and to the unit tests and fuzzers, which test them).
INCS       := -Isrc/core -Ilmdb_schema -Iadmin/lib $(PKG_CFLAGS)
TEST_INCS  := -Iadmin/keyauthd -Iadmin/keyauthctl -Iadmin/syncd $(GTEST_CFLAGS)
# -MMD -MP: each object lists the headers it read (build/**/*.d, included below).
DEPFLAGS   := -MMD -MP
# OPT_FLAGS / LINK_FLAGS: the programs are built with what dpkg-buildflags
# gives a Debian package on bookworm (hardening=+all; debian/rules passes
# dpkg-buildflags' own), so that make deb can reuse these objects. The
# prefix map keeps this tree's path out of the objects, as in the package.
OPT_FLAGS  := -g -O2 -ffile-prefix-map=$(CURDIR)=. -fstack-protector-strong -Wformat \
              -Werror=format-security -Wdate-time -D_FORTIFY_SOURCE=2
LINK_FLAGS := -Wl,-z,relro -Wl,-z,now
CXXFLAGS    = $(CXXSTD) -fPIC $(WARN) $(INCS) $(DEPFLAGS) $(OPT_FLAGS)
# An object is rebuilt when the flags of its tree change (make alone only
# sees files change): each tree records them in its cxxflags file, a
# prerequisite of its objects. The prefix map is left out of the record: it
# only names the tree, so a copy of these objects elsewhere stays current.
# The records are written when make reads this file (record_flags, below),
# never by a rule: a rule that runs on every make had make -j rebuild
# objects that were up to date, those it looked at while the rule ran.
OBJ_RECORD := $(BUILD)/obj/cxxflags

# Same hardening as Debian's own nginx build (nginx -V).
NGX_CC_OPT := -g -O2 -fstack-protector-strong -Wformat -Werror=format-security \
              -fPIC -D_FORTIFY_SOURCE=2 -Wextra
NGX_LD_OPT := -Wl,-z,relro -Wl,-z,now -fPIC

# One list of sources: every file of a folder belongs to it (the nginx
# `config` script globs src/ and src/core/ the same way).
CORE_SRCS     := $(wildcard src/core/*.cc)
LIB_SRCS      := $(wildcard admin/lib/*.cc)
KEYAUTHD_SRCS := $(wildcard admin/keyauthd/*.cc)
KEYAUTHCTL_SRCS := $(wildcard admin/keyauthctl/*.cc)
SYNCD_SRCS    := $(wildcard admin/syncd/*.cc)
# the programs without their main(), for the unit tests and fuzzers
PROGRAM_PARTS := $(filter-out %/main.cc,$(KEYAUTHD_SRCS) $(KEYAUTHCTL_SRCS) $(SYNCD_SRCS))
TEST_SRCS     := $(wildcard tests/*.cc)

obj = $(patsubst %.cc,$(BUILD)/$(1)/%.o,$(2))
CORE_OBJS  := $(call obj,obj,$(CORE_SRCS))
LIB_OBJS   := $(call obj,obj,$(LIB_SRCS))
TEST_OBJS  := $(call obj,obj,$(TEST_SRCS) $(PROGRAM_PARTS))
SAN_LIB_OBJS := $(call obj,sanobj,$(CORE_SRCS) $(LIB_SRCS))
SAN_PARTS  := $(SAN_LIB_OBJS) $(call obj,sanobj,$(PROGRAM_PARTS))
SAN_OBJS   := $(SAN_PARTS) $(call obj,sanobj,$(TEST_SRCS))
# The module is built by nginx's own make, which does not see header changes.
MODULE_HEADERS := $(wildcard src/core/*.h lmdb_schema/*.h)
NGX_DEPS   := config $(wildcard src/*.c src/*.h) $(CORE_SRCS) $(MODULE_HEADERS)

APT_PKGS   := build-essential pkg-config nginx-core nginx-dev libpcre2-dev zlib1g-dev libssl-dev \
              liblmdb-dev liblmdb++-dev lmdb-utils nlohmann-json3-dev libgtest-dev \
              libboost-dev perl curl wrk clang libclang-rt-14-dev gdb \
              etcd-server etcd-client libcurl4-openssl-dev redis-server libhiredis-dev prometheus \
              chromium chromium-driver python3-selenium faketime libio-socket-ssl-perl
BENCH_PKGS := valgrind libnginx-mod-http-lua linux-perf
# make deb / make test-deb: Debian's packaging tools (dh_nginx and the
# nginx_mod build system come with nginx-dev)
DEB_PKGS   := debhelper dpkg-dev help2man bash-completion lintian

.PHONY: all help deps bench-deps module test asan-builds test-builds test-stress unit unit-asan e2e e2e-asan e2e-plain-only check-layering soak run run-cluster bench bench-edges bench-maps bench-profile bench-shared deb test-deb programs fuzz fuzz-short clean

# The whole end-to-end suite again against an ASan+UBSan build of the module
# (nginx preloads the sanitizer runtime), keyauthd and keyauthctl.
ASAN_DIR     := $(BUILD)/asan
NGX_ASAN     := $(CURDIR)/$(BUILD)/nginx-asan
SAN_CC_OPT   := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=all -fPIC -Wextra
SAN_TOOLS    := $(ASAN_DIR)/keyauthctl $(ASAN_DIR)/keyauthd $(ASAN_DIR)/keyauth-syncd

# One sanitizer build of the C++ sources, by clang, with ASan+UBSan and
# libFuzzer's coverage hooks (which do nothing outside a fuzzer): the ASan
# unit tests, the ASan programs and the libFuzzer targets (every parser that
# sees untrusted bytes) link the same objects, so each source is compiled
# once for all three. Line tables are all a sanitizer's stack trace needs.
SAN_CXX      := clang++
SAN_COMMON   := $(DEPFLAGS) $(CXXSTD) -gline-tables-only -fno-omit-frame-pointer \
                -fsanitize=address,undefined -fno-sanitize-recover=all $(WARN) $(INCS) $(TEST_INCS)
SAN_FLAGS    := $(SAN_COMMON) -O1 -fsanitize=fuzzer-no-link
# The unit tests' own files: what they test is in the objects above, and no
# fuzzer links them, so they are built unoptimised and without the fuzzer's
# hooks (about 40% less compile time for those files). So is the console's
# HTTP server (Boost.Beast and Asio): no fuzzer reaches a socket, and it is
# the heaviest file by far, 73 CPU-s at -O1 with the hooks, 27 so.
SAN_TEST_FLAGS := $(SAN_COMMON) -O0
SAN_UNFUZZED := admin/lib/http_server.cc
SAN_RECORD   := $(BUILD)/sanobj/cxxflags
SAN_LINK     := $(SAN_CXX) -fsanitize=address,undefined
FUZZERS      := $(patsubst fuzz/%.cc,$(BUILD)/fuzz/%,$(wildcard fuzz/*.cc))
FUZZ_SECONDS ?= 60

# Objects reached through pattern chains are not to be deleted as intermediates.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

all: $(MODULE) $(BUILD)/keyauthctl $(BUILD)/keyauthd $(BUILD)/keyauth-syncd

help:
	@echo "make              build the module, keyauthd, keyauthctl and keyauth-syncd into build/ (installs nothing)"
	@echo "make deps         install the Debian packages the build and tests need (idempotent)"
	@echo "make test         deps, then every test: unit and end-to-end (ASan/UBSan), fuzzers 5 s each, layering, packages"
	@echo "make test-stress  the suites of make test beside STRESS_LOAD (3) busy loops, STRESS_ROUNDS (1) times"
	@echo "make run          deps, build, seed var/ and run nginx + keyauthd on 127.0.0.1:8080 (Ctrl-C stops)"
	@echo "make run-cluster  deps, build, and run 3 etcd members, 2 keyauthd, 2 edges (nginx + syncd) on loopback"
	@echo "make unit-asan    unit tests (GoogleTest) under ASan + UBSan (make test)   make unit  the same, plain"
	@echo "make e2e          end-to-end tests (prove t/)    make e2e-asan   against sanitizer builds (make test)"
	@echo "make fuzz         every libFuzzer target for FUZZ_SECONDS (60)"
	@echo "make check-layering  fail if a file includes across a layer it must not"
	@echo "make bench        wrk + callgrind against peers (bench/RESULTS.md)"
	@echo "make bench-profile where a request's worker CPU goes, piece by piece (perf on the worker)"
	@echo "make bench-edges  many-edge figures: revocation propagation, syncd catch-up, bootstrap at 1M keys"
	@echo "make bench-maps   10M keys in stores of the default map size, past it while nginx serves"
	@echo "make bench-shared keyauth_shared_limits: Redis traffic at 10k active keys, overshoot of one key on 3 edges"
	@echo "make deb          the Debian packages (libnginx-mod-http-keyauth, keyauth) into build/deb/, lintian'd"
	@echo "make test-deb     make deb, then install them, run the stack as the units would, purge (root; CI runs it)"
	@echo "make soak         SOAK_SECONDS (600) of load with keys churning"
	@echo "make clean        remove build/"

# Installs the Debian packages of a list that are missing: quiet, idempotent.
define apt_install
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	  done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && \
	  apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi
endef

# tools/openapi: the OpenAPI linter and validator t/24-openapi.t runs (npm,
# pinned by its package-lock.json; Node.js comes with the machine image, or
# from Debian if it is missing).
OPENAPI_TOOLS := tools/openapi

deps:
	$(call apt_install,$(APT_PKGS) $(DEB_PKGS))
	@command -v npm >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
	@[ -x $(OPENAPI_TOOLS)/node_modules/.bin/redocly ] || { \
	  echo "make deps: npm ci in $(OPENAPI_TOOLS)"; \
	  cd $(OPENAPI_TOOLS) && npm ci --no-audit --no-fund --loglevel=error >/dev/null; }
	@[ $(CONSOLE_TOOLS)/node_modules/.package-lock.json -nt $(CONSOLE_TOOLS)/package-lock.json ] || { \
	  echo "make deps: npm ci in $(CONSOLE_TOOLS)"; \
	  cd $(CONSOLE_TOOLS) && npm ci --no-audit --no-fund --loglevel=error >/dev/null; }

# The developer console page as it is served (make run, the tests, the
# package): console/ plus uPlot (the usage charts) and its license, copied
# from tools/console/node_modules, which make deps fills with npm ci (pinned
# by tools/console/package-lock.json). A plain make never installs: without
# node_modules it stops and says so. No CDN: the page loads its own copy.
CONSOLE_TOOLS := tools/console
UPLOT         := $(CONSOLE_TOOLS)/node_modules/uplot
CONSOLE_OUT   := $(BUILD)/console
CONSOLE_FILES := $(addprefix $(CONSOLE_OUT)/,$(notdir $(wildcard console/*)) \
                   uPlot.iife.min.js uPlot.min.css uPlot.LICENSE.txt)

.PHONY: console
all: console
e2e-asan: console
console: $(CONSOLE_FILES)

$(CONSOLE_OUT)/%: console/%
	@mkdir -p $(@D) && cp $< $@
$(CONSOLE_OUT)/uPlot.%: $(UPLOT)/dist/uPlot.%
	@mkdir -p $(@D) && cp $< $@
$(CONSOLE_OUT)/uPlot.LICENSE.txt: $(UPLOT)/LICENSE
	@mkdir -p $(@D) && cp $< $@
$(UPLOT)/dist/uPlot.iife.min.js $(UPLOT)/dist/uPlot.min.css $(UPLOT)/LICENSE:
	@echo "make: $@ is missing: run 'make deps' (npm ci in $(CONSOLE_TOOLS)), then make again" >&2; exit 1

# The benchmark's peers and tools on top: valgrind for callgrind, the Lua
# module for the Kong-style peer (loaded only by the bench's own nginx), and
# perf for make bench-profile.
bench-deps: deps
	$(call apt_install,$(BENCH_PKGS))

module: $(MODULE)

# nginx-dev's sources: without them, say what to run rather than fail obscurely.
NGX_CONFIGURE := $(NGX_SRC)/configure
$(NGX_CONFIGURE):
	@echo "$@ is missing: run 'make deps' (it installs nginx-dev)"; exit 1

$(MODULE): $(NGX_DEPS) | $(NGX_CONFIGURE)
	@mkdir -p $(NGX_BUILD)
	@source $(NGX_SRC)/conf_flags && cd $(NGX_SRC) && \
	  ./configure "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="$(NGX_CC_OPT)" \
	    --with-ld-opt="$(NGX_LD_OPT)" --add-dynamic-module=$(CURDIR) \
	    --builddir=$(NGX_BUILD) > $(NGX_BUILD)/configure.log 2>&1 \
	  || { cat $(NGX_BUILD)/configure.log; exit 1; }
	$(MAKE) -s -f $(NGX_BUILD)/Makefile -C $(NGX_SRC) modules
	@# a new inode: a running nginx keeps its mapping of the old module
	cp $(NGX_BUILD)/ngx_http_keyauth_module.so $@.tmp && mv -f $@.tmp $@

# record_flags FILE TEXT: TEXT into FILE unless it holds it already (so its
# time changes only with the flags). Not for make clean or make help.
record_flags = $(shell mkdir -p $(dir $(1)) && { echo '$(2)' | cmp -s - $(1) || echo '$(2)' > $(1); })
ifneq ($(filter-out clean help,$(or $(MAKECMDGOALS),all)),)
$(call record_flags,$(OBJ_RECORD),$(filter-out -ffile-prefix-map=%,$(CXX) $(CXXFLAGS)))
$(call record_flags,$(SAN_RECORD),$(SAN_CXX) $(SAN_FLAGS) -- tests and $(SAN_UNFUZZED): $(SAN_TEST_FLAGS))
endif

$(BUILD)/obj/%.o: %.cc $(OBJ_RECORD)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# SAN_OBJ_FLAGS, not SAN_FLAGS, is set per file: the flags record, a
# prerequisite, would inherit it.
SAN_OBJ_FLAGS = $(SAN_FLAGS)
$(call obj,sanobj,$(TEST_SRCS) $(SAN_UNFUZZED)): SAN_OBJ_FLAGS = $(SAN_TEST_FLAGS)

$(BUILD)/sanobj/%.o: %.cc $(SAN_RECORD)
	@mkdir -p $(dir $@)
	$(SAN_CXX) $(SAN_OBJ_FLAGS) -c $< -o $@

# the unit tests see the programs' headers too
$(BUILD)/obj/tests/%.o: tests/%.cc $(OBJ_RECORD)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(TEST_INCS) -c $< -o $@

# Which folder may include which: tests/check_layering.sh (it tests itself
# on a tree with one violation of each kind first).
check-layering:
	@tests/check_layering.sh --self-test && tests/check_layering.sh .

# The fuzzers link the sanitizer objects from an archive, so each takes only
# what it calls: fifteen links of every object cost 50 CPU-s, these 16. (An
# archive holds one member of a name: two sources of one name in different
# folders stop the build.)
SAN_ARCHIVE := $(BUILD)/sanobj/parts.a
$(SAN_ARCHIVE): $(SAN_PARTS)
	@dup=$$(printf '%s\n' $(notdir $^) | sort | uniq -d); \
	  [ -z "$$dup" ] || { echo "make: $@ would hold one of each of:" $$dup >&2; exit 1; }
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/%: $(BUILD)/sanobj/fuzz/%.o $(SAN_ARCHIVE)
	@mkdir -p $(dir $@)
	$(SAN_LINK) -fsanitize=fuzzer $^ -o $@ $(LIBS)

# Each fuzzer runs FUZZ_SECONDS from its seeds in fuzz/corpus; what it learns
# stays in build/fuzz-corpus, crashes land in build/fuzz-crashes.
fuzz: $(FUZZERS)
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

$(ASAN_DIR)/ngx_http_keyauth_module.so: $(NGX_DEPS) | $(NGX_CONFIGURE)
	@mkdir -p $(NGX_ASAN) $(ASAN_DIR)
	@source $(NGX_SRC)/conf_flags && cd $(NGX_SRC) && \
	  ./configure "$${NGX_CONF_FLAGS[@]}" --with-cc-opt="$(SAN_CC_OPT)" \
	    --with-ld-opt="-fsanitize=address,undefined" --add-dynamic-module=$(CURDIR) \
	    --builddir=$(NGX_ASAN) > $(NGX_ASAN)/configure.log 2>&1 \
	  || { cat $(NGX_ASAN)/configure.log; exit 1; }
	$(MAKE) -s -f $(NGX_ASAN)/Makefile -C $(NGX_SRC) modules
	cp $(NGX_ASAN)/ngx_http_keyauth_module.so $@.tmp && mv -f $@.tmp $@

$(ASAN_DIR)/keyauthctl: $(call obj,sanobj,$(KEYAUTHCTL_SRCS)) $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(SAN_LINK) -o $@ $^ $(LIBS)

$(ASAN_DIR)/keyauthd: $(call obj,sanobj,$(KEYAUTHD_SRCS)) $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(SAN_LINK) -o $@ $^ $(LIBS) -pthread

$(ASAN_DIR)/keyauth-syncd: $(call obj,sanobj,$(SYNCD_SRCS)) $(SAN_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(SAN_LINK) -o $@ $^ $(LIBS) -pthread

# prove runs E2E_JOBS files at a time, the longest first (so none of them
# starts last and runs alone: the order of a fresh-clone .ci/run's ASan
# times, 2026-11-28); the ASan run, at the end of make test with
# the machine nearly to itself, E2E_ASAN_JOBS.
E2E_JOBS      ?= 2
E2E_ASAN_JOBS ?= 4
E2E_LONGEST   := t/19-lifecycle-cli.t t/09-cli.t t/50-faults.t t/34-quota-ledger.t t/45-webhooks.t t/61-many-edges.t \
                 t/39-usage-hour-edge.t t/43-admin-usage-report.t t/46-webhooks-etcd.t t/15-core-dumps.t t/24-openapi.t \
                 t/31-usage-api.t t/28-quotas.t t/17-console-abuse.t t/70-shared-limits.t t/69-snapshot-bootstrap.t \
                 t/26-key-invariants.t t/25-console-page.t t/66-quota-redis.t t/18-lifecycle.t \
                 t/29-usage-over-time.t
E2E_FILES     := $(E2E_LONGEST) $(filter-out $(E2E_LONGEST),$(sort $(wildcard t/*.t)))

e2e-asan: $(ASAN_DIR)/ngx_http_keyauth_module.so $(SAN_TOOLS)
	KEYAUTH_BUILD=$(ASAN_DIR) prove --timer -j$(E2E_ASAN_JOBS) $(E2E_FILES)

$(BUILD)/keyauthctl: $(call obj,obj,$(KEYAUTHCTL_SRCS)) $(LIB_OBJS) $(CORE_OBJS)
	$(CXX) $(LINK_FLAGS) -o $@ $^ $(LIBS)

$(BUILD)/keyauthd: $(call obj,obj,$(KEYAUTHD_SRCS)) $(LIB_OBJS) $(CORE_OBJS)
	$(CXX) $(LINK_FLAGS) -o $@ $^ $(LIBS) -pthread

$(BUILD)/keyauth-syncd: $(call obj,obj,$(SYNCD_SRCS)) $(LIB_OBJS) $(CORE_OBJS)
	$(CXX) $(LINK_FLAGS) -o $@ $^ $(LIBS) -pthread

# The three programs without the module (debian/rules builds the module
# with nginx-dev's nginx_mod build system).
programs: $(BUILD)/keyauthctl $(BUILD)/keyauthd $(BUILD)/keyauth-syncd

$(BUILD)/unit_tests: $(TEST_OBJS) $(LIB_OBJS) $(CORE_OBJS)
	$(CXX) -o $@ $^ $(LIBS) $(GTEST_LIBS)

$(BUILD)/unit_tests_asan: $(SAN_OBJS)
	$(SAN_LINK) -o $@ $^ $(LIBS) $(GTEST_LIBS)

unit: $(BUILD)/unit_tests
	$(BUILD)/unit_tests --gtest_brief=1

# UNIT_SHARDS (2) processes, each a share of the tests (GoogleTest's
# sharding): most of them wait on etcd and Redis members of their own.
# Each share's output is shown after it ends.
UNIT_SHARDS ?= 2
unit-asan: $(BUILD)/unit_tests_asan
	@pids=; for i in $$(seq 0 $$(( $(UNIT_SHARDS) - 1 ))); do \
	  GTEST_TOTAL_SHARDS=$(UNIT_SHARDS) GTEST_SHARD_INDEX=$$i \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    $(BUILD)/unit_tests_asan --gtest_brief=1 > $(BUILD)/unit-asan-$$i.log 2>&1 & pids="$$pids $$!"; \
	done; \
	rc=0 i=0; for p in $$pids; do \
	  wait $$p || rc=1; echo "unit-asan: share $$i of $(UNIT_SHARDS)"; cat $(BUILD)/unit-asan-$$i.log; i=$$((i + 1)); \
	done; exit $$rc

e2e: all
	prove --timer -j$(E2E_JOBS) $(E2E_FILES)

# make test runs each end-to-end file once, under the sanitizers, and plain
# only the files with assertions a sanitizer build cannot make (each skips
# them under ASan: core dumps, resident memory); the plain build is also what
# test-deb installs and runs. make e2e runs every file plain.
E2E_PLAIN_ONLY  = $(shell grep -l 'skip .* if \$$ASAN' t/*.t)
e2e-plain-only: all
	prove --timer -j$(E2E_JOBS) $(E2E_PLAIN_ONLY)

# what the ASan end-to-end run needs, then everything the suites need
ASAN_BUILDS := $(ASAN_DIR)/ngx_http_keyauth_module.so $(SAN_TOOLS)
TEST_BUILDS := $(MODULE) $(BUILD)/keyauthctl $(BUILD)/keyauthd $(BUILD)/keyauth-syncd \
               $(ASAN_BUILDS) $(BUILD)/unit_tests_asan $(FUZZERS)
# make test: every suite, started as soon as what it needs is built, in one
# make with TEST_JOBS (4) job slots. At once: the plain-only end-to-end files
# (they need only `all`), as root (CI is) the Debian packages' build,
# install, run and purge (test-deb: it reuses the plain objects, and mostly
# waits), the layering check, and the sanitizer build of the module and the
# programs (a sub-make sharing the job server). Once those are built, the
# ASan end-to-end run (each file once; make e2e runs them all plain), while
# the rest of the sanitizer tree builds (the unit tests and the fuzzers: the
# compilers fill the time the end-to-end files wait on their servers); then
# the unit tests (once, in the sanitizer build; make unit runs them plain)
# and the fuzzers. The ASan end-to-end run never shares the machine with the
# plain one. Every suite runs, whatever another's result; each one's output
# is shown whole when it ends, with its time, and make test fails at the end
# if any failed, naming them.
TEST_DEB     = $(if $(filter 0,$(shell id -u)),test-deb)
TEST_SUITES  = e2e-plain-only asan-builds $(TEST_DEB) check-layering test-builds e2e-asan unit-asan fuzz-short
TEST_JOBS   ?= 4
TEST_FAILED  = $(BUILD)/test-failed
RUN_SUITES   = rm -f $(TEST_FAILED); \
               $(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(addprefix timed-,$(TEST_SUITES)); \
               if [ -s $(TEST_FAILED) ]; then echo "make test: FAILED:" $$(cat $(TEST_FAILED)); false; fi

timed-test-builds: | timed-asan-builds
timed-e2e-asan: | timed-asan-builds timed-e2e-plain-only
timed-unit-asan timed-fuzz-short: | timed-test-builds

asan-builds:
	@$(MAKE) --no-print-directory $(ASAN_BUILDS)

test-builds:
	@$(MAKE) --no-print-directory $(TEST_BUILDS)

test: deps
	$(MAKE) -j2 all
	@$(RUN_SUITES)

# timed-SUITE: SUITE, saying how long it took; a failure is written down for
# make test (so the suites after it still run). Never .PHONY: pattern rules
# do not apply to those.
timed-%:
	@start=$$(date +%s); \
	if $(MAKE) --no-print-directory $*; then \
	  echo "make test: $* passed in $$(( $$(date +%s) - start )) s"; \
	else echo "make test: $* FAILED after $$(( $$(date +%s) - start )) s"; \
	  mkdir -p $(dir $(TEST_FAILED)) && echo $* >> $(TEST_FAILED); fi

# The suites of make test on a busy machine: STRESS_LOAD (3) CPU-bound loops
# run beside them, for STRESS_ROUNDS (1) rounds; every suite runs in every
# round, and it fails if any round failed. The loops are killed when
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
	  ( $(RUN_SUITES) ) || failed="$$failed $$r"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-stress: FAILED in round(s)$$failed of $(STRESS_ROUNDS)"; exit 1; fi; \
	echo "test-stress: all $(STRESS_ROUNDS) round(s) passed"

# every core: a fresh clone compiles for minutes on one
run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@nginx_conf/run-demo.sh

run-cluster: deps
	@$(MAKE) --no-print-directory all
	@nginx_conf/run-cluster.sh

# Not part of make test: SOAK_SECONDS (600) of load with keys churning.
soak: deps
	@$(MAKE) --no-print-directory all
	SOAK_SECONDS=$${SOAK_SECONDS:-600} prove -v soak/

bench: bench-deps
	@$(MAKE) --no-print-directory all
	@bench/run.sh

# Where a request's worker CPU goes, piece by piece (perf), and each piece's
# data cache misses (callgrind's cache simulation): docs/performance.md
bench-profile: bench-deps
	@$(MAKE) --no-print-directory all
	@PROFILE=1 SCALE_KEYS="$${SCALE_KEYS-1000000}" bench/run.sh
	@CACHE_ONLY=1 CACHE_KEYS=$${CACHE_KEYS:-1000000} bench/callgrind.sh

bench-edges: deps
	@$(MAKE) --no-print-directory all
	@bench/many-edges.pl

# 10M keys in stores of every program's default map size (issue 49)
bench-maps: deps
	@$(MAKE) --no-print-directory all
	@bench/default-maps.pl

bench-shared: deps
	@$(MAKE) --no-print-directory all
	@bench/shared-limits.pl

# The packages, from the tracked files (and uPlot from
# tools/console/node_modules, as no npm runs in the build), with
# dpkg-buildpackage; lintian must find no error and no warning that
# debian/*.lintian-overrides does not explain. The programs' objects of this
# tree go in with the sources, made current first: debian/rules builds with
# the same flags (OPT_FLAGS), so its make finds them up to date and only
# links, unless the flags differ (the flags record), when it compiles them
# all again. The tree is fresh, so dpkg-buildpackage's pre-clean is skipped.
DEB_DIR  := $(BUILD)/deb
DEB_TREE := $(DEB_DIR)/src/keyauth
DEB_OBJ  := $(DEB_TREE)/debian/build-progs/obj

deb: deps
	@$(MAKE) --no-print-directory programs
	@rm -rf $(DEB_DIR) && mkdir -p $(DEB_TREE) $(DEB_OBJ)
	@git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C $(DEB_TREE)
	@mkdir -p $(DEB_TREE)/$(dir $(UPLOT)) && cp -a $(UPLOT) $(DEB_TREE)/$(UPLOT)
	@cp -a $(OBJ_RECORD) $(BUILD)/obj/src $(BUILD)/obj/admin $(DEB_OBJ)/
	@find $(DEB_OBJ) -name '*.d' -exec sed -i 's|^$(BUILD)/obj/|debian/build-progs/obj/|' {} +
	@echo "make deb: dpkg-buildpackage (log: $(DEB_DIR)/build.log)"
	@cd $(DEB_TREE) && dpkg-buildpackage -b --no-sign --no-pre-clean -j2 > $(CURDIR)/$(DEB_DIR)/build.log 2>&1 \
	  || { tail -40 $(CURDIR)/$(DEB_DIR)/build.log; exit 1; }
	@mv $(DEB_DIR)/src/*.deb $(DEB_DIR)/src/*.changes $(DEB_DIR)/src/*.buildinfo $(DEB_DIR)/
	@ls $(DEB_DIR)/*.deb
	@lintian --fail-on error,warning $(DEB_DIR)/*.changes \
	  | tee $(DEB_DIR)/lintian.log

test-deb: deb
	prove --exec '' t/deb/install-and-run :: $(DEB_DIR)

clean:
	rm -rf $(BUILD)
