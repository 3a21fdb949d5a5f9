package KeyauthTest;

# End-to-end harness: a throwaway directory with an LMDB store made by the
# real keyauthctl, and a real nginx (the packaged binary loading the built
# module) on free loopback ports. Core Perl only.

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use Fcntl ();
use File::Temp qw(tempdir);
use IO::Socket::INET;
use JSON::PP;
use POSIX ();
use Time::HiRes qw(sleep time);
use Exporter 'import';
use Scalar::Util qw(weaken);

our @EXPORT_OK = qw(http_request raw_request wait_until rfc3339);

# The locations most tests serve: the IP tool behind keyauth (scope ip:read),
# and the edge's keyauth_status.
our $IP_AND_STATUS = <<'LOC';
        location /v1/ip/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_pass http://tool;
        }
        location = /status { keyauth_status; }
LOC

my $ROOT = abs_path(dirname(__FILE__) . '/../..');

# KEYAUTH_BUILD=build/asan runs everything against the sanitizer build: nginx
# preloads the runtime for the instrumented module, and every report lands in
# the test directory, where END below looks for it.
my $BUILD = abs_path("$ROOT/" . ($ENV{KEYAUTH_BUILD} // 'build'));
my $ASAN = ($ENV{KEYAUTH_BUILD} // '') =~ /asan/;
my $ASAN_RUNTIME = $ASAN ? do { my $p = `gcc -print-file-name=libasan.so`; chomp $p; $p } : '';
my @REPORT_DIRS;

# By absolute path: a binary upgrade (USR2) re-executes argv[0] as given.
my ($NGINX) = grep { -x } map { "$_/nginx" } split(/:/, $ENV{PATH} // ''), '/usr/sbin';
sub nginx_bin { $NGINX }

# Live instances, stopped before File::Temp removes their directories (END
# blocks run last-defined first, and this one is defined after File::Temp's).
my @LIVE;
END {
    for my $t (grep { defined } @LIVE) {
        $t->DESTROY;
    }
    my @reports = map { glob "$_/sanitizer.*" } @REPORT_DIRS;
    if (@reports) {
        for my $r (@reports) {
            open my $fh, '<', $r or next;
            print STDERR "== $r\n", <$fh>;
        }
        print "not ok - sanitizer reports: @reports\n";
        $? = 1;
    }
}

sub root { $ROOT }

# A test file that hangs fails by itself instead of holding make test until
# CI's limit: after KEYAUTH_TEST_DEADLINE seconds (900; 0 = none), or on
# SIGTERM, it says so, kills what it started (a process stuck before nginx
# wrote its pid file is found by parentage) and exits through END, which
# stops the rest. A forked client inherits the alarm but not the duty.
my $DEADLINE = $ENV{KEYAUTH_TEST_DEADLINE} // 900;
sub _descendants {
    my ($pid) = @_;
    my %kids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        open my $fh, '<', $stat or next;
        my $line = <$fh> // next;
        push @{ $kids{$2} }, $1 if $line =~ /^(\d+) \(.*\) \S+ (\d+)/s;
    }
    my @all;
    my @todo = ($pid);
    while (defined(my $p = shift @todo)) {
        for my $k (@{ $kids{$p} // [] }) { push @all, $k; push @todo, $k }
    }
    return @all;
}
my $MAIN_PID = $$;
sub _give_up {
    my ($why) = @_;
    exit 1 if $$ != $MAIN_PID;
    defined &Test::More::ok ? Test::More::ok(0, $why) : print "not ok - $why\n";
    print STDERR "# $why: killing what this test started\n";
    kill 'KILL', _descendants($$);
    exit 1;
}
$SIG{ALRM} = sub { _give_up("still running after ${DEADLINE}s (KEYAUTH_TEST_DEADLINE)") };
$SIG{TERM} = sub { _give_up('terminated') };
alarm $DEADLINE if $DEADLINE;

# For a child about to exec a program the test will SIGKILL on purpose: no
# leak check at its exit (a kill that lands while LeakSanitizer stops the
# world makes it report "Unable to get registers", which is the kill, not a
# defect). Memory errors are still reported. Nothing without ASan.
sub no_leak_check_before_kill {
    $ENV{ASAN_OPTIONS} =~ s/detect_leaks=1/detect_leaks=0/ if $ASAN && defined $ENV{ASAN_OPTIONS};
}

# Polls $code every 50 ms until it returns true or $timeout seconds (30 by
# default) have passed; returns its last value. Tests wait on a condition this
# way, never by sleeping a guessed time, so that a busy machine only makes
# them slower. A timeout is generous: it costs nothing while things work. On
# a timeout it says in the test output what it waited for.
sub wait_until {
    my ($code, $timeout, $what) = @_;
    $timeout //= 30;
    my $deadline = time + $timeout;
    while (1) {
        my $v = $code->();
        return $v if $v;
        if (time >= $deadline) {
            my $msg = "gave up after ${timeout}s waiting for " . ($what // 'a condition');
            defined &Test::More::diag ? Test::More::diag($msg) : print STDERR "# $msg\n";
            return $v;
        }
        sleep 0.05;
    }
}
sub module_path { "$BUILD/ngx_http_keyauth_module.so" }
sub build_dir { $BUILD }
# The console page as make builds it (console/ plus uPlot): one for every
# build of the programs (make's console target, part of all).
sub console_dir { "$ROOT/build/console" }

# Runs code with the environment nginx needs for the module being tested.
# start_nginx(faketime => '@2026-11-30 23:59:54'): nginx's wall clock starts
# there and runs on (libfaketime; CLOCK_MONOTONIC stays real, so timers do).
my $FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

sub with_nginx_env {
    my ($dir, $code) = @_;
    # libfaketime goes first: loaded after the ASan runtime, its constructor
    # starts ASan, whose allocator then calls the not yet resolved
    # clock_gettime of libfaketime, which allocates under the allocator's
    # lock (a deadlock at exec, every time). ASan is then told not to insist
    # on coming first.
    my @preload = (($ENV{FAKETIME} ? $FAKETIME_LIB : ()), ($ASAN ? $ASAN_RUNTIME : ()));
    local $ENV{LD_PRELOAD} = join(':', @preload) if @preload;
    local $ENV{ASAN_OPTIONS} = "log_path=$dir/sanitizer:detect_leaks=0"
        . ($ENV{FAKETIME} ? ':verify_asan_link_order=0' : '') if $ASAN;
    return $code->();
}

sub new {
    my ($class, %opt) = @_;
    my $dir = tempdir('keyauth-t-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{KEYAUTH_KEEP});
    mkdir "$dir/logs";
    my $self = bless {
        dir     => $dir,
        db      => "$dir/db",
        ctl     => "$BUILD/keyauthctl",
        module  => "$BUILD/ngx_http_keyauth_module.so",
        workers => $opt{workers} // 2,
        owner   => $$,
        # many-edge mode: keyauthctl and keyauthd use etcd; db is this
        # edge's LMDB mirror, written by keyauth-syncd
        etcd    => $opt{etcd},
    }, $class;
    push @LIVE, $self;
    weaken $LIVE[-1];
    if ($ASAN) {
        push @REPORT_DIRS, $dir;
        my $opts = "log_path=$dir/sanitizer:print_stacktrace=1";
        $ENV{ASAN_OPTIONS} = "$opts:detect_leaks=1";
        $ENV{UBSAN_OPTIONS} = $opts;
    }
    return $self;
}

sub dir { $_[0]{dir} }
sub db  { $_[0]{db} }

# A port nobody listens on now, and that no other test process is given
# while this one lives. Ports come from below the kernel's ephemeral range:
# a port there is never handed out behind our back (a server on port 0, the
# source port of every client connection), which the old way (bind port 0,
# close, hand the port out) could not prevent between the close and the
# server's bind. Test processes that run at once (prove -j) keep out of each
# other's way with a lock on a file named after the port, held until the
# process ends (the kernel drops it then, even after a crash). start_nginx
# still retries with fresh ports should a bind fail.
my ($EPHEMERAL_LOW) = do {
    local (@ARGV, $/) = ('/proc/sys/net/ipv4/ip_local_port_range');
    (eval { <> } // '') =~ /^\s*(\d+)/;
};
$EPHEMERAL_LOW = 32768 unless $EPHEMERAL_LOW && $EPHEMERAL_LOW > 12000;
my $PORT_LOCKS = '/tmp/keyauth-test-ports';
my %handed_out;  # port => the locked file
sub free_port {
    for (1 .. 1000) {
        my $port = 10000 + int(rand($EPHEMERAL_LOW - 10000));
        return $port if hold_port($port);
    }
    die "no free port below $EPHEMERAL_LOW in 1000 tries";
}

# Takes one given port as free_port takes its own (for a block of ports at
# fixed offsets, t/41): true if it is now this process's; release_port gives
# back one that turned out not to be needed.
sub hold_port {
    my ($port) = @_;
    return 0 if $handed_out{$port} || $port >= $EPHEMERAL_LOW || $port < 1024;
    mkdir $PORT_LOCKS;
    open my $lock, '>>', "$PORT_LOCKS/$port" or return 0;
    return 0 unless flock($lock, Fcntl::LOCK_EX() | Fcntl::LOCK_NB());
    # something else listens (or lingers) there
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 1)
        or return 0;
    close $s;
    $handed_out{$port} = $lock;
    return 1;
}
sub release_port { delete $handed_out{ $_[0] } }
sub ephemeral_low { $EPHEMERAL_LOW }

# Runs keyauthctl with --json; returns (exit code, decoded stdout or undef, stderr).
sub ctl_raw {
    my ($self, @args) = @_;
    my $err = "$self->{dir}/ctl.err";
    my @store = $self->store_args;
    my $out = qx{"$self->{ctl}" @{[ map { _q($_) } @store ]} --json @{[ map { _q($_) } @args ]} 2>"$err"};
    my $rc = $? >> 8;
    my $stderr = do { local (@ARGV, $/) = ($err); <> } // '';
    my $json = eval { decode_json($out) };
    return ($rc, $json, $stderr);
}

sub ctl {
    my ($self, @args) = @_;
    my ($rc, $json, $stderr) = $self->ctl_raw(@args);
    die "keyauthctl @args failed ($rc): $stderr" if $rc != 0;
    return $json;
}

# keyauthctl on this store as an operator types it (text, no --json, no
# shell): (exit code, stdout, stderr).
sub ctl_text {
    my ($self, @args) = @_;
    my ($out, $err) = map { "$self->{dir}/ctl-text.$_" } qw(out err);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', $out or die $!;
        open STDERR, '>', $err or die $!;
        exec { $self->{ctl} } $self->{ctl}, $self->store_args, @args or die "exec: $!";
    }
    waitpid $pid, 0;
    my $slurp = sub { open my $fh, '<', $_[0] or return ''; local $/; <$fh> // '' };
    return ($? >> 8, $slurp->($out), $slurp->($err));
}

# Where keyauthctl and keyauthd find the store.
sub store_args {
    my $self = shift;
    return $self->{etcd} ? ('--etcd', $self->{etcd}) : ('--db', $self->{db});
}

sub _q { my $s = shift; $s =~ s/'/'\\''/g; return "'$s'" }

sub account {
    my ($self, %o) = @_;
    # Tests make many keys: a cap well above DESIGN's default of 100 unless
    # a test asks (max_keys => undef keeps the default).
    my @cap = exists $o{max_keys} ? (defined $o{max_keys} ? ('--max-keys', $o{max_keys}) : ())
                                  : ('--max-keys', 100000000);
    my @allowed = map { ('--allowed-scope', $_) } @{ $o{allowed_scopes} // [] };
    return $self->ctl('account', 'create', '--name', $o{name} // 'acme',
                      '--entitlement', $o{entitlement} // 6000, @cap, @allowed);
}

sub key {
    my ($self, %o) = @_;
    my @scopes = map { ('--scope', $_) } @{ $o{scopes} // ['ip:read'] };
    return $self->ctl('key', 'create', '--account', $o{account}, '--name', $o{name} // 'test key',
                      @scopes, '--rate', $o{rate} // 6000);
}

# Starts nginx with the given server-level locations in front of an echo
# upstream (another server block of the same nginx) that reports what it got.
sub start_nginx {
    my ($self, %o) = @_;
    $self->ctl('init') unless $o{no_init};
    local $ENV{FAKETIME} = $o{faketime} if $o{faketime};
    local $ENV{DONT_FAKE_MONOTONIC} = 1 if $o{faketime};
    local $ENV{FAKETIME_DONT_RESET} = 1 if $o{faketime};
    for my $attempt (1 .. 5) {
        $self->{port} = free_port();
        $self->{upstream_port} = free_port();
        $self->_write_conf(%o);
        # nginx frees nothing at exit by design: no leak checks for it
        my $rc = with_nginx_env($self->{dir}, sub {
            system($NGINX, '-p', $self->{dir}, '-c', "$self->{dir}/nginx.conf",
                   '-e', "$self->{dir}/logs/error.log");
        });
        if ($rc == 0 && $self->_wait_port($self->{port})) {
            $self->{running} = 1;
            $self->{master_pid} = $self->pid;
            return $self;
        }
        $self->stop_nginx;
    }
    die "nginx did not start:\n" . $self->error_log;
}

sub _write_conf {
    my ($self, %o) = @_;
    my $d = $self->{dir};
    my $user = $> == 0 ? ($o{user} ? "user $o{user};" : 'user root root;') : '';
    my $level = $o{log_level} // 'info';
    my $main = $o{main} // '';
    my $http = $o{http} // '';
    my $locations = $o{locations} // '';
    my $db = exists $o{db} ? $o{db} : $self->{db};
    my $db_line = defined $db ? "keyauth_db $db;" : '';
    # a binary upgrade re-executes nginx with only the variables "env" names;
    # and nginx clears the workers' environment of the rest, so libfaketime
    # (which reads FAKETIME again every few seconds) would fall back to the
    # real clock about 10 s into a run without its variables here
    my @env = (($ASAN ? qw(LD_PRELOAD ASAN_OPTIONS) : ()),
               ($ENV{FAKETIME} ? qw(FAKETIME DONT_FAKE_MONOTONIC FAKETIME_DONT_RESET) : ()),
               ($ENV{FAKETIME} && !$ASAN ? 'LD_PRELOAD' : ()));
    my $env_lines = join("\n", map { "env $_;" } @env);
    open my $fh, '>', "$d/nginx.conf" or die $!;
    print $fh <<"CONF";
load_module $self->{module};
$user
$env_lines
$main
worker_processes $self->{workers};
error_log $d/logs/error.log $level;
pid $d/nginx.pid;
events { worker_connections 1024; }
http {
    access_log $d/logs/access.log;
    client_body_temp_path $d/tmp_body;
    proxy_temp_path $d/tmp_proxy;
    fastcgi_temp_path $d/tmp_fastcgi;
    uwsgi_temp_path $d/tmp_uwsgi;
    scgi_temp_path $d/tmp_scgi;
    $db_line
    $http
    upstream tool { server 127.0.0.1:$self->{upstream_port}; keepalive 8; }
    server {
        listen 127.0.0.1:$self->{port};
        $locations
    }
    server {
        listen 127.0.0.1:$self->{upstream_port};
        # who is calling, as a location with proxy_set_header X-Plan-Id
        # \$keyauth_plan_id (and the others) hands it on
        location /who/ {
            return 200 "plan=\$http_x_plan_id\\nname=\$http_x_key_name\\nkeymeta=\$http_x_key_meta\\naccountmeta=\$http_x_account_meta\\n";
        }
        location / {
            return 200 "upstream uri=\$request_uri key=\$http_x_key_id account=\$http_x_account_id prefix=\$http_x_key_prefix auth=\$http_authorization\\n";
        }
    }
}
CONF
    close $fh;
}

# A sanitizer build on a busy machine can take seconds to start.
sub _wait_port {
    my ($self, $port) = @_;
    return wait_until(sub {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port) or return 0;
        close $s;
        return 1;
    }, 30, "a listener on port $port");
}

sub pid {
    my $self = shift;
    open my $fh, '<', "$self->{dir}/nginx.pid" or return;
    my $pid = <$fh>;
    chomp $pid if defined $pid;
    return $pid;
}

sub signal_nginx {
    my ($self, $sig) = @_;
    return with_nginx_env($self->{dir}, sub {
        system($NGINX, '-p', $self->{dir}, '-c', "$self->{dir}/nginx.conf",
               '-e', "$self->{dir}/logs/error.log", '-s', $sig) == 0;
    });
}

# Pids of the current worker processes (children of the master).
sub worker_pids {
    my $self = shift;
    my $master = $self->pid or return ();
    return children_of($master);
}

# Pids of the processes whose parent is $parent.
sub children_of {
    my $parent = shift;
    my @pids;
    for my $stat (glob '/proc/[0-9]*/stat') {
        open my $fh, '<', $stat or next;
        my $line = <$fh> // next;
        my ($pid, $ppid) = $line =~ /^(\d+) \(.*?\) \S+ (\d+)/ or next;
        push @pids, $pid if $ppid == $parent;
    }
    return @pids;
}

sub stop_nginx {
    my $self = shift;
    my $pid = $self->pid // $self->{master_pid};
    if ($pid && kill 0, $pid) {
        kill 'QUIT', $pid;
        my $deadline = time + 30;   # a graceful stop, on a busy machine
        sleep 0.05 while kill(0, $pid) && time < $deadline;
        kill 'KILL', $pid if kill 0, $pid;
    }
    unlink "$self->{dir}/nginx.pid";
    $self->{running} = 0;
}

sub error_log {
    my $self = shift;
    open my $fh, '<', "$self->{dir}/logs/error.log" or return '';
    local $/;
    return <$fh>;
}

sub port { $_[0]{port} }

# Starts the real keyauthd on a free loopback port; stop_keyauthd(SIGNAL)
# stops it (TERM by default, KILL for a crash). With core_dir, it runs there
# with no limit on the size of a core file. It believes the X-Real-IP of
# nginx, which reaches it from 127.0.0.1, as make run's keyauthd does;
# trusted_proxy => ADDRS says whom else, '' no one. faketime => OFFSET runs
# it under libfaketime (as start_nginx's), e.g. on nginx's faked clock;
# faketime_file => PATH reads the offset from that file at every call, so a
# test moves keyauthd's clock by writing it ("+5m").
sub start_keyauthd {
    my ($self, %o) = @_;
    if ($o{faketime_file}) {
        $o{faketime} = '+0';
        local $ENV{FAKETIME_TIMESTAMP_FILE} = $o{faketime_file};
        local $ENV{FAKETIME_NO_CACHE} = 1;
        delete $o{faketime_file};
        return $self->start_keyauthd(%o, _file_clock => 1);
    }
    local $ENV{FAKETIME} = $o{faketime} if $o{faketime} && !$o{_file_clock};
    local $ENV{DONT_FAKE_MONOTONIC} = 1 if $o{faketime};
    # the sanitizer build of keyauthd carries its runtime: libfaketime alone
    # is preloaded, and ASan told not to insist on coming first
    local $ENV{LD_PRELOAD} = $FAKETIME_LIB if $o{faketime};
    local $ENV{ASAN_OPTIONS} = ($ENV{ASAN_OPTIONS} // '') . ':verify_asan_link_order=0' if $o{faketime} && $ASAN;
    my $trusted = $o{trusted_proxy} // '127.0.0.1';
    my @extra = length $trusted ? ('--trusted-proxy', $trusted) : ();
    push @extra, '--map-size', $o{map_size_mib} if $o{map_size_mib};
    push @extra, @{ $o{args} // [] };
    $self->{keyauthd_port} //= free_port();
    # admin => 1: the admin API on a listener of its own (admin_port)
    if ($o{admin}) {
        $self->{admin_port} //= free_port();
        push @extra, '--admin-listen', "127.0.0.1:$self->{admin_port}";
    }
    my @cmd = ("$BUILD/keyauthd", $self->store_args,
               '--listen', "127.0.0.1:$self->{keyauthd_port}", @extra);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>>', "$self->{dir}/logs/keyauthd.log" or die $!;
        open STDOUT, '>&', \*STDERR or die $!;
        exec '/bin/sh', '-c', 'ulimit -c unlimited && cd "$0" && exec "$@"', $o{core_dir}, @cmd
            if $o{core_dir};
        exec @cmd;
        die "exec keyauthd: $!";
    }
    $self->{keyauthd_pid} = $pid;
    $self->_wait_port($self->{keyauthd_port}) or die "keyauthd did not start";
    $self->_wait_port($self->{admin_port}) or die "keyauthd's admin listener did not start" if $o{admin};
    return $self;
}

sub admin_port { $_[0]{admin_port} }

# An admin API caller with `token` (none: no Authorization), straight to
# keyauthd's admin listener: ($method, $path, $body) -> the answer, its JSON
# in {json}, its error code in {code}; a body that is a reference is sent
# as JSON.
sub admin_client {
    my ($self, $token) = @_;
    my $codec = JSON::PP->new->utf8->canonical;
    return sub {
        my ($method, $path, $body, @extra) = @_;
        my @h = ((defined $token ? ("Authorization: Bearer $token") : ()), @extra);
        if (defined $body) {
            my $text = ref $body ? $codec->encode($body) : $body;
            push @h, 'Content-Type: application/json', \$text;
        }
        my $res = http_request($self->{admin_port}, $method, $path, @h);
        $res->{json} = json_body($res);
        $res->{code} = ref $res->{json} eq 'HASH' && $res->{json}{error} ? $res->{json}{error}{code} : '';
        return $res;
    };
}

sub stop_keyauthd {
    my ($self, $sig) = @_;
    my $pid = delete $self->{keyauthd_pid} or return;
    kill $sig // 'TERM', $pid;
    waitpid $pid, 0;
    return $?;
}

sub keyauthd_port { $_[0]{keyauthd_port} }
sub keyauthd_pid { $_[0]{keyauthd_pid} }

sub keyauthd_log {
    my $self = shift;
    open my $fh, '<', "$self->{dir}/logs/keyauthd.log" or return '';
    local $/;
    return <$fh>;
}

# http-level and server-level configuration of the console API as shipped.
# With unlimited => 1 the per-address limit zones let everything through
# (the soak's churn is one heavy client).
sub console_http {
    my ($self, %o) = @_;
    $self->{keyauthd_port} //= free_port();
    my $zones = $o{unlimited}
        ? "limit_conn_zone \$binary_remote_addr zone=keyauth_console_conn:1m;\n"
          . "limit_req_zone \$binary_remote_addr zone=keyauth_console_req:1m rate=1000000r/s;\n"
        : "include $ROOT/nginx_conf/console_http.conf;\n";
    return $zones
         . "upstream keyauthd { server 127.0.0.1:$self->{keyauthd_port}; keepalive 8; keepalive_timeout 4s; }";
}

sub console_locations { "include $ROOT/nginx_conf/console_api.conf;" }

# Locations that charge units three ways, for the usage and quota tests: the
# IP tool (1 unit a call), /three/ (keyauth_cost 3) and /metered/ (the
# upstream reports ?u= units in X-Units, keyauth_cost_header).
sub metered_locations {
    return <<'LOC';
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
        location /three/ { keyauth on; keyauth_cost 3; proxy_pass http://tool; }
        location /metered/ {
            keyauth on;
            keyauth_cost_header X-Units;
            proxy_pass http://127.0.0.1:$server_port/units/$is_args$args;
        }
        location /units/ { add_header X-Units $arg_u; return 200 "counted\n"; }
LOC
}

# The console stack of one mode: keyauthd (admin => 1: with its admin
# listener; keyauthd => {...}: more of start_keyauthd's options), on etcd also keyauth-syncd (synced before nginx starts), and
# nginx with the console API and `locations` (and `http`: more http-level lines).
sub start_console_stack {
    my ($self, %o) = @_;
    $self->start_keyauthd(admin => $o{admin}, %{ $o{keyauthd} // {} });
    if ($self->{etcd}) {
        $self->start_syncd;
        $self->wait_synced or die "syncd did not sync:\n" . $self->syncd_log;
    }
    $self->start_nginx(http => $self->console_http . "\nkeyauth_zone keys:1m;\n" . ($o{http} // ''),
                       locations => $self->console_locations . ($o{locations} // ''), no_init => !!$self->{etcd});
}

# A console API caller with `token`: ($method, $path, $body) -> the answer,
# its JSON in {json}; a body that is a reference is sent as JSON.
sub console_client {
    my ($self, $token) = @_;
    my $codec = JSON::PP->new->utf8->canonical;
    return sub {
        my ($method, $path, $body) = @_;
        my @h = ("Authorization: Bearer $token");
        if (defined $body) {
            my $text = ref $body ? $codec->encode($body) : $body;
            push @h, 'Content-Type: application/json', \$text;
        }
        my $res = $self->request($method, $path, @h);
        $res->{json} = json_body($res);
        $res->{code} = ref $res->{json} eq 'HASH' && $res->{json}{error} ? $res->{json}{error}{code} : '';
        return $res;
    };
}

# RFC 3339 UTC with milliseconds, as the console API answers, of epoch seconds.
sub rfc3339 {
    my $t = shift;
    my $ms = int($t * 1000 + 0.5);
    return POSIX::strftime('%Y-%m-%dT%H:%M:%S', gmtime(int($ms / 1000))) . sprintf('.%03dZ', $ms % 1000);
}

# keyauth-syncd mirroring $self->{etcd} into this edge's store (db), with
# its metrics on a free loopback port; stop_syncd(SIGNAL) stops it (TERM by
# default). Waits until it listens, not until the mirror is complete: see
# wait_synced.
sub start_syncd {
    my ($self, %o) = @_;
    $self->{syncd_port} //= free_port();
    my @cmd = ("$BUILD/keyauth-syncd", '--etcd', $o{etcd} // $self->{etcd}, '--db', $self->{db},
               '--metrics', "127.0.0.1:$self->{syncd_port}", @{ $o{args} // [] });
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>>', "$self->{dir}/logs/syncd.log" or die $!;
        open STDOUT, '>&', \*STDERR or die $!;
        exec @cmd;
        die "exec keyauth-syncd: $!";
    }
    $self->{syncd_pid} = $pid;
    $self->_wait_port($self->{syncd_port}) or die "keyauth-syncd did not start";
    return $self;
}

sub stop_syncd {
    my ($self, $sig) = @_;
    my $pid = delete $self->{syncd_pid} or return;
    kill $sig // 'TERM', $pid;
    waitpid $pid, 0;
    return $?;
}

sub syncd_pid { $_[0]{syncd_pid} }
sub syncd_port { $_[0]{syncd_port} }
sub syncd_log { my $f = "$_[0]{dir}/logs/syncd.log"; -e $f ? do { local (@ARGV, $/) = ($f); <> } : '' }

# GET /healthz of syncd: (status, decoded body or undef).
sub syncd_health {
    my $self = shift;
    my $res = http_request($self->{syncd_port}, GET => '/healthz');
    return ($res->{status}, eval { decode_json($res->{body}) });
}

# A metric of syncd's /metrics (the first sample of that name), or undef.
sub syncd_metric {
    my ($self, $name) = @_;
    my $res = http_request($self->{syncd_port}, GET => '/metrics');
    return $res->{body} =~ /^\Q$name\E(?:\{[^}]*\})? (\S+)$/m ? $1 + 0 : undef;
}

# Waits until syncd has applied at least etcd revision $rev (the newest
# when not given) and says it is healthy.
sub wait_synced {
    my ($self, $rev, $timeout) = @_;
    return wait_until(sub {
        my ($st, $h) = $self->syncd_health;
        $st == 200 && $h && (!defined $rev || $h->{revision} >= $rev);
    }, $timeout // 30, 'syncd to apply revision ' . ($rev // 'any'));
}

# The usage env of this edge (keyauth_db's path + ".usage", or $dir), read
# with mdb_dump: { "acc_... key_..." => { allowed, rateLimited, lastUsedMs } }
# (empty while it does not exist).
sub usage {
    my ($self, $dir) = @_;
    $dir //= "$self->{db}.usage";
    return {} unless -e "$dir/data.mdb";
    open my $fh, '-|', 'mdb_dump', '-s', 'usage', $dir or die "mdb_dump: $!";
    my ($data, @lines) = (0);
    while (my $l = <$fh>) {
        chomp $l;
        if ($l eq 'HEADER=END') { $data = 1; next }
        last if $l eq 'DATA=END';
        push @lines, $l =~ s/^ //r if $data;
    }
    close $fh;
    my %u;
    while (my ($k, $v) = splice @lines, 0, 2) {
        my ($ver, $allowed, $limited, $last) = unpack 'v x6 Q< Q< q<', pack 'H*', $v;
        next unless $ver == 1 && length $k == 48;
        $u{'acc_' . substr($k, 0, 24) . ' key_' . substr($k, 24)} =
            { allowed => $allowed, rateLimited => $limited, lastUsedMs => $last };
    }
    return \%u;
}

# The periods (hours or days since the epoch) of the buckets in the usage
# env's `hours` or `days` table (keyauth_db + ".usage", or $dir), read with
# mdb_dump: { period => number of buckets } (empty while there is none).
sub usage_buckets {
    my ($self, $table, $dir) = @_;
    $dir //= "$self->{db}.usage";
    return {} unless -e "$dir/data.mdb";
    open my $fh, '-|', 'mdb_dump', '-s', $table, $dir or die "mdb_dump: $!";
    my ($data, $key, %periods) = (0);
    while (my $l = <$fh>) {
        chomp $l;
        if ($l eq 'HEADER=END') { $data = 1; next }
        last if $l eq 'DATA=END';
        next unless $data;
        if (defined $key) { undef $key; next }   # the value line
        ($key = $l) =~ s/^ //;
        $periods{ hex substr($key, 0, 8) }++ if length $key == 56;
    }
    close $fh;
    return \%periods;
}

sub DESTROY {
    my $self = shift;
    local $?;  # waitpid here must not become the test's exit status
    return unless $self->{owner} == $$;  # not in a forked client
    $self->stop_nginx if $self->{running};
    $self->stop_keyauthd if $self->{keyauthd_pid};
    $self->stop_syncd if $self->{syncd_pid};
}

# Raw HTTP/1.1 over a fresh connection, so that tests control every byte
# (duplicate headers, odd bytes, huge values). Returns a hash:
# { status, headers => { lc name => [values] }, body, raw }. A trailing
# scalar reference is sent as the request body.
sub request {
    my ($self, $method, $path, @headers) = @_;
    return http_request($self->{port}, $method, $path, @headers);
}

# A client in a child process sending GET $path with @headers, one connection
# per request, for at most $seconds or until ->stop. Its handle tells
# ->progress (successes, failures so far), so that a test can wait until
# requests have flowed rather than guess a time; ->stop ends it and ->finish
# waits for its end, both returning (successes, failures), a failure being any
# non-200 or connection error. $seconds may be { seconds => N, pause => S }:
# S seconds between requests (0.002 by default, a few hundred a second, for
# the short windows of a reload or an upgrade; a fault that lasts half a
# minute is seen as well at 0.02, for a tenth of the CPU).
sub background_client {
    my ($self, $seconds, $path, @headers) = @_;
    my $pause = 0.002;
    ($seconds, $pause) = ($seconds->{seconds}, $seconds->{pause} // $pause) if ref $seconds;
    my $port = $self->{port};
    my $out = "$self->{dir}/client-" . time . "-$$.out";
    unlink "$out.stop";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my ($ok, $bad) = (0, 0);
        open my $progress, '>', "$out.progress" or die $!;
        my $deadline = time + $seconds;
        while (time < $deadline && !-e "$out.stop") {
            my $st = eval { http_request($port, GET => $path, @headers)->{status} } // 0;
            $st == 200 ? $ok++ : $bad++;
            # the counts only grow: one write over the old one, never shorter
            sysseek $progress, 0, 0;
            syswrite $progress, "$ok $bad\n";
            # paced: every moment of a fault still sees requests, and the
            # suites beside it keep their CPU
            select undef, undef, undef, $pause;
        }
        open my $fh, '>', $out or die $!;
        print $fh "$ok $bad\n";
        close $fh;
        POSIX::_exit(0);  # no END blocks: the temp dir belongs to the parent
    }
    return bless { pid => $pid, out => $out }, 'KeyauthTest::Client';
}

package KeyauthTest::Client;

sub progress {
    my $c = shift;
    open my $fh, '<', "$c->{out}.progress" or return (0, 0);
    my ($ok, $bad) = (<$fh> // '') =~ /^(\d+) (\d+)\n/ or return (0, 0);
    return ($ok, $bad);
}

sub successes { ($_[0]->progress)[0] }

sub stop {
    my $c = shift;
    open my $fh, '>', "$c->{out}.stop" or die $!;
    close $fh;
    return $c->finish;
}

sub finish {
    my $c = shift;
    waitpid $c->{pid}, 0;
    open my $fh, '<', $c->{out} or die "no client result: $!";
    my ($ok, $bad) = split ' ', <$fh>;
    return ($ok, $bad);
}

package KeyauthTest;

sub http_request {
    my ($port, $method, $path, @headers) = @_;
    return raw_request($port, request_text($method, $path, @headers));
}

# http_request from another loopback address than 127.0.0.1 (LOCAL), as a
# client other than nginx or the test itself
sub http_request_from {
    my ($local, $port, $method, $path, @headers) = @_;
    return raw_request($port, request_text($method, $path, @headers), $local);
}

sub request_text {
    my ($method, $path, @headers) = @_;
    my $body = '';
    if (@headers && ref $headers[-1] eq 'SCALAR') {
        $body = ${ pop @headers };
        push @headers, 'Content-Length: ' . length $body;
    }
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    $req .= "$_\r\n" for @headers;
    $req .= "\r\n" . $body;
    return $req;
}

# Sends the bytes as they are over a fresh connection (from LOCAL, an
# address, if given) and reads to EOF; returns the first response as
# http_request does.
sub raw_request {
    my ($port, $req, $local) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 10,
                                  $local ? (LocalAddr => $local) : ())
        or die "connect: $!";
    print $s $req;
    local $/;
    my $raw = <$s> // '';
    close $s;
    my ($head, $resp_body) = split /\r\n\r\n/, $raw, 2;
    my @lines = split /\r\n/, $head // '';
    my $status_line = shift @lines // '';
    my ($status) = $status_line =~ m{^HTTP/\d\.\d (\d{3})};
    my %h;
    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        push @{ $h{lc $k} }, $v;
    }
    $resp_body = dechunk($resp_body) if ($h{'transfer-encoding'} // [''])->[0] =~ /chunked/i;
    return { status => $status // 0, headers => \%h, body => $resp_body // '', raw => $raw };
}

# A chunked body (RFC 9112 7.1) as its bytes; undef when it is cut short
# (no last chunk), so a broken transfer never passes for a whole one.
sub dechunk {
    my $rest = shift // '';
    my $body = '';
    while ($rest =~ s/\A([0-9A-Fa-f]+)[^\r\n]*\r\n//) {
        my $n = hex $1;
        return $body if $n == 0;
        return undef if length $rest < $n + 2;
        $body .= substr($rest, 0, $n);
        $rest = substr($rest, $n + 2);
    }
    return undef;
}

sub header {
    my ($res, $name) = @_;
    my $v = $res->{headers}{lc $name};
    return $v ? $v->[0] : undef;
}

sub json_body {
    my $res = shift;
    return eval { decode_json($res->{body}) };
}

1;
