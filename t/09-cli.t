# keyauthctl's command line: every command takes only its own options and
# arguments. An unknown command or option, an option given twice, a missing
# value or a stray argument is a usage error (exit 2, the message and the
# usage on stderr, nothing on stdout), found before the store is opened or
# created; the valid forms keep working.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use KeyauthTest;

my $t = KeyauthTest->new;
my $ctl = $t->{ctl};
my $db = $t->db;
my $acc = $t->account;
my $key = $t->key(account => $acc->{id});
my $fresh = $t->dir . '/fresh';

# keyauthctl ARGS exactly as given (no shell): (exit code, stdout, stderr).
sub run_ctl_captured {
    my (@args) = @_;
    my ($out, $err) = map { $t->dir . "/cli.$_" } qw(out err);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', $out or die $!;
        open STDERR, '>', $err or die $!;
        exec { $ctl } $ctl, @args or die "exec: $!";
    }
    waitpid $pid, 0;
    my $rc = $? >> 8;
    my $slurp = sub { open my $fh, '<', $_[0] or return ''; local $/; <$fh> // '' };
    return ($rc, $slurp->($out), $slurp->($err));
}

my $A = $acc->{id};
my $K = $key->{id};
my $seed = KeyauthTest::root() . '/lmdb_schema/plans.json';

my @usage_errors = (
    # unknown commands
    [[], qr/no command/],
    [['frobnicate'], qr/unknown command "frobnicate"/],
    [['key'], qr/key needs a command: create, list, show, update, roll, revoke, report-leak$/m],
    [['account'], qr/account needs a command: create, list, show, update, set-plan, set-entitlement, suspend, resume, rotate-token$/m],
    [['audit'], qr/audit needs a command: list$/m],
    [['audit', 'show'], qr/unknown audit command "show"/],
    [['key', 'frob'], qr/unknown key command "frob"/],
    [['fx'], qr/fx needs a command: set, show/],
    # unknown options, also one valid elsewhere
    [['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5,
      '--expires-in', '3600'], qr/unknown option "--expires-in"/],
    [['key', 'list', '--account', $A, '--expires-at', '2030-01-01T00:00:00Z'], qr/key list does not take --expires-at/],
    [['init', '--bogus'], qr/unknown option "--bogus"/],
    [['key', 'list', '--account', $A, '--bogus', 1], qr/unknown option "--bogus"/],
    [['init', '-x'], qr/unknown option "-x"/],
    [['init', '--name', 'x'], qr/init does not take --name/],
    [['key', 'list', '--account', $A, '--count', 5], qr/key list does not take --count/],
    [['key', 'revoke', $K, '--rate', 5], qr/key revoke does not take --rate/],
    [['account', 'list', '--user', 'www-data'], qr/account list does not take --user/],
    [['doctor', '--map-size', 64], qr/doctor does not take --map-size/],
    [['--json=yes', 'account', 'list'], qr/--json takes no value/],
    # an option given twice
    [['account', 'create', '--name', 'a', '--name', 'b', '--entitlement', 5], qr/--name given more than once/],
    [['key', 'list', '--account', $A, '--limit', 1, '--limit', 2], qr/--limit given more than once/],
    [['key', 'list', '--account', $A, '--account', $A], qr/--account given more than once/],
    [['--db', $db, 'account', 'list'], qr/--db given more than once/],
    [['--json', 'account', 'list'], qr/--json given more than once/],
    [['--map-size', 64, '--map-size', 64, 'init'], qr/--map-size given more than once/],
    # a missing value
    [['account', 'create', '--entitlement', 5, '--name'], qr/--name needs a value$/m],
    [['account', 'create', '--name', '--entitlement', 5], qr/--name needs a value, not the option "--entitlement"/],
    [['key', 'list', '--limit', '--account', $A], qr/--limit needs a value/],
    # a missing option
    [['account', 'create', '--name', 'a'], qr/account create needs --entitlement/],
    [['key', 'create', '--account', $A, '--name', 'n', '--rate', 5], qr/key create needs --scope/],
    [['key', 'list'], qr/key list needs --account/],
    # stray or missing arguments
    [['init', 'now'], qr/unexpected argument "now" after init/],
    [['account', 'list', 'all'], qr/unexpected argument "all" after account list/],
    [['key', 'create', 'extra', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5],
     qr/unexpected argument "extra" after key create/],
    [['key', 'revoke', $K, $K], qr/unexpected argument "\Q$K\E" after key revoke/],
    [['key', 'revoke'], qr/key revoke needs KEY_ID/],
    [['plans', 'import', $seed, $seed], qr/unexpected argument .* after plans import/],
    [['plans', 'import'], qr/plans import needs FILE/],
    [['fx', 'set', '83', '84'], qr/unexpected argument "84" after fx set/],
    [['fx', 'set'], qr/fx set needs RATE/],
    [['fx', 'show', 'now'], qr/unexpected argument "now" after fx show/],
    [['doctor', 'now'], qr/unexpected argument "now" after doctor/],
    [['account', 'list', '--', '--json'], qr/unexpected argument "--json" after account list/],
    # the two stores, and etcd's options without etcd
    [['--etcd', 'http://127.0.0.1:1', 'account', 'list'], qr/--db and --etcd name two stores/],
    [['--etcd-prefix', '/x', 'account', 'list'], qr/--etcd-prefix needs --etcd/],
    [['--etcd-cacert', '/x', 'init'], qr/--etcd-cacert needs --etcd/],
    [['doctor', '--etcd', 'http://127.0.0.1:1'], qr/doctor does not take --etcd/],
    # the lifecycle commands (issue #16)
    (map { [['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5,
             '--expires-at', $_->[0]], $_->[1]] }
        ['tomorrow', qr/--expires-at must be an RFC 3339 time such as \S+, not "tomorrow"/],
        ['never', qr/--expires-at must be an RFC 3339 time such as \S+, not "never"/],
        ['2030-01-01', qr/--expires-at must be an RFC 3339 time/],
        ['2030-02-30T00:00:00Z', qr/--expires-at must be an RFC 3339 time/],
        ['2030-01-01T00:00:00', qr/--expires-at must be an RFC 3339 time/],
        ['2030-01-01T00:00:60Z', qr/--expires-at must be an RFC 3339 time/],
        ['2030-01-01T00:00:00Z' . ('0' x 80), qr/--expires-at must be an RFC 3339 time/]),
    [['key', 'show'], qr/key show needs KEY_ID/],
    [['key', 'show', 'nope'], qr/KEY_ID "nope" is not a key_<24 hex digits> id/],
    [['key', 'show', $A], qr/KEY_ID "\Q$A\E" is not a key_/],
    [['key', 'show', $K, '--rate', 5], qr/key show does not take --rate/],
    [['key', 'show', $K, '--account', 'acc_1'], qr/--account "acc_1" is not an? acc_/],
    [['key', 'update'], qr/key update needs KEY_ID/],
    [['key', 'update', $K], qr/key update needs something to change: --name, --scope, --rate, --expires-at, --quota, --allow-ip or --meta/],
    # quotas (issue 28): the form is checked before the store is opened
    [['key', 'update', $K, '--quota', '0/day'], qr/--quota "0\/day": units must be an integer from 1 to 281474976710655/],
    [['key', 'update', $K, '--quota', '-1/day'], qr/--quota "-1\/day": units must be/],
    [['key', 'update', $K, '--quota', '9007199254740993/month'], qr/--quota "9007199254740993\/month": units must be/],
    [['key', 'update', $K, '--quota', '10/week'], qr/--quota "10\/week": the period must be "day", "month" or "total"/],
    [['key', 'update', $K, '--quota', '10'], qr/--quota "10": must be UNITS\/day/],
    [['account', 'update', $A, '--quota', '10/total'], qr/--quota "10\/total": total credits are for keys/],
    [['account', 'update', $A, '--quota', '0/month'], qr/--quota "0\/month": units must be/],
    [['account', 'create', '--name', 'x', '--entitlement', 5, '--quota', 'plan'], qr/--quota "plan": must be UNITS\/day/],
    [['account', 'create', '--name', 'x'], qr/account create needs --entitlement \(or --plan/],
    [['account', 'set-plan', $A], qr/account set-plan needs PLAN_ID/],
    [['key', 'update', $K, '--account', $A], qr/key update needs something to change/],
    [['key', 'update', $K, '--expires-at', 'later'], qr/--expires-at must be an RFC 3339 time such as \S+ or "never", not "later"/],
    [['key', 'update', $K, '--expires-at', 'Never'], qr/--expires-at must be an RFC 3339 time/],
    [['key', 'update', $K, '--rate', 'x'], qr/--rate must be a positive integer, not "x"/],
    [['key', 'update', $K, '--rate', '99999999999'], qr/--rate must be a positive integer/],
    [['key', 'update', $K, '--count', 2], qr/key update does not take --count/],
    [['key', 'update', $K, '--name', 'a', '--name', 'b'], qr/--name given more than once/],
    [['key', 'update', $K, $K, '--name', 'a'], qr/unexpected argument "\Q$K\E" after key update/],
    [['key', 'update', 'key_zz', '--name', 'a'], qr/KEY_ID "key_zz" is not a key_/],
    [['key', 'roll'], qr/key roll needs KEY_ID/],
    [['key', 'roll', $K, '--grace-seconds', '-1'], qr/--grace-seconds must be a positive integer, not "-1"/],
    [['key', 'roll', $K, '--grace-seconds', '1h'], qr/--grace-seconds must be a positive integer/],
    [['key', 'roll', $K, '--grace-seconds'], qr/--grace-seconds needs a value/],
    [['key', 'roll', $K, '--name', 'x'], qr/key roll does not take --name/],
    [['key', 'roll', $K, '--expires-at', '2030-01-01T00:00:00Z'], qr/key roll does not take --expires-at/],
    [['account', 'show'], qr/account show needs ACC_ID/],
    [['account', 'show', $K], qr/ACC_ID "\Q$K\E" is not an? acc_/],
    [['account', 'update'], qr/account update needs ACC_ID/],
    [['account', 'update', '--any-scope'], qr/account update needs ACC_ID/],
    [['account', 'update', $A], qr/account update needs something to change: --name, --entitlement, --max-keys, --quota, --allowed-scope, --any-scope, --allow-ip or --meta/],
    [['account', 'update', $A, '--allowed-scope', 'ip:read', '--any-scope'],
     qr/--allowed-scope and --any-scope contradict each other/],
    [['account', 'update', $A, '--any-scope=yes'], qr/--any-scope takes no value/],
    [['account', 'update', $A, '--any-scope', '--any-scope'], qr/--any-scope given more than once/],
    [['account', 'update', $A, '--max-keys', 'lots'], qr/--max-keys must be a positive integer/],
    [['account', 'update', $A, '--entitlement', '-5'], qr/--entitlement must be a positive integer/],
    [['account', 'update', $A, '--scope', 'ip:read'], qr/account update does not take --scope/],
    [['account', 'update', 'acc_zz', '--name', 'x'], qr/ACC_ID "acc_zz" is not an? acc_/],
    [['account', 'create', '--name', 'a', '--entitlement', 5, '--any-scope'], qr/account create does not take --any-scope/],
    [['account', 'suspend'], qr/account suspend needs ACC_ID/],
    [['account', 'suspend', $A, 'now'], qr/unexpected argument "now" after account suspend/],
    [['account', 'suspend', '--account', $A], qr/account suspend needs ACC_ID/],
    [['account', 'resume', 'acc_zz'], qr/ACC_ID "acc_zz" is not an? acc_/],
    [['account', 'resume', $A, '--name', 'x'], qr/account resume does not take --name/],
    [['account', 'rotate-token'], qr/account rotate-token needs ACC_ID/],
    [['account', 'rotate-token', $A, '--grace-seconds', 'soon'], qr/--grace-seconds must be a positive integer, not "soon"/],
    [['account', 'rotate-token', $A, '--grace-seconds', '1', '--grace-seconds', '2'], qr/--grace-seconds given more than once/],
    [['audit', 'list', '--limit', 0], qr/--limit must be from 1 to 1000/],
    [['audit', 'list', '--limit', 1001], qr/--limit must be from 1 to 1000/],
    [['audit', 'list', '--cursor', $K], qr/--cursor "\Q$K\E" is not an? evt_/],
    [['audit', 'list', '--account', 'x'], qr/--account "x" is not an? acc_/],
    [['audit', 'list', 'all'], qr/unexpected argument "all" after audit list/],
    [['audit', 'list', '--name', 'x'], qr/audit list does not take --name/],
);

# what the store holds before the usage errors, to show they wrote nothing
sub store_state {
    my @state;
    for my $args (['audit', 'list', '--limit', 1000], ['key', 'show', $K], ['account', 'show', $A]) {
        my ($rc, $out) = run_ctl_captured('--db', $db, '--json', @$args);
        die "@$args: $rc" if $rc;
        push @state, $out;
    }
    return join '', @state;
}
my $before = store_state();

for my $case (@usage_errors) {
    my ($args, $re) = @$case;
    my $name = "keyauthctl @$args";
    my ($rc, $out, $err) = run_ctl_captured('--db', $db, '--json', @$args);
    is $rc, 2, "$name: exit 2";
    like $err, qr/^keyauthctl: /, "$name: an error message";
    like $err, $re, "$name: says what is wrong";
    like $err, qr/^usage: keyauthctl/m, "$name: and the usage";
    is $out, '', "$name: nothing on stdout";
}

# many-edge mode's own mistakes, without --db
for my $case (
    [['--etcd', 'ftp://127.0.0.1:1', 'account', 'list'], 2, qr/--etcd: /, 'an endpoint that is not http(s)'],
    [['--etcd', 'http://127.0.0.1:1', '--etcd-prefix', 'x', 'account', 'list'], 2, qr/prefix/, 'a prefix without "/"'],
    [['--etcd', 'http://127.0.0.1:1', '--map-size', 64, 'init'], 2, qr/--map-size is for an LMDB store/, '--map-size on etcd'],
    [['--etcd', 'http://127.0.0.1:' . KeyauthTest::free_port(), 'account', 'list'], 1,
     qr/etcd read failed \(unavailable\)/, 'no etcd there: the store refused, exit 1'],
) {
    my ($args, $code, $re, $name) = @$case;
    my ($rc, $out, $err) = run_ctl_captured(@$args);
    is $rc, $code, "keyauthctl --etcd, $name: exit $code";
    like $err, $re, "... says why" or diag $err;
    is $out, '', '... nothing on stdout';
}

# found before the store is opened: nothing is created
for my $args (['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5, '--bogus', 1],
              ['init', 'extra'], ['account', 'create', '--name', 'a']) {
    my ($rc) = run_ctl_captured('--db', $fresh, @$args);
    is $rc, 2, "fresh store, @$args: exit 2";
    ok !-e $fresh, "fresh store, @$args: nothing created";
}

# a secret pasted as a stray argument or an option is masked in the message
my $secret = $key->{secret};
for my $args (['init', $secret], ['init', "--$secret"]) {
    my ($rc, undef, $err) = run_ctl_captured('--db', $db, @$args);
    is $rc, 2, 'a secret as an argument: exit 2';
    unlike $err, qr/\Q${\ substr($secret, 12) }\E/, 'the secret is masked';
    like $err, qr/\Q$key->{prefix}\E\*+/, '(after its 12-character prefix)';
}

# well-formed, but the store refuses: exit 1 with its message, no usage
my $no_key = 'key_' . ('0' x 24);
my $no_acc = 'acc_' . ('0' x 24);
for my $case (
    [['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5,
      '--expires-at', '2000-01-01T00:00:00Z'], qr/expiresAt must be in the future/],
    [['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5,
      '--expires-at', '1970-01-01T00:00:00Z'], qr/expiresAt must be in the future/],
    [['key', 'create', '--account', $A, '--name', 'n', '--scope', 'ip:read', '--rate', 5,
      '--expires-at', '2100-01-01T00:00:00+05:30'], qr/expiresAt must be at most 3652 days ahead/],
    [['key', 'update', $K, '--expires-at', '2001-01-01T00:00:00Z'], qr/expiresAt must be in the future/],
    [['key', 'update', $K, '--rate', 0], qr/rateLimitPerMinute/],
    [['key', 'roll', $K, '--grace-seconds', 604801], qr/gracePeriodSeconds must be an integer from 0 to 604800/],
    [['account', 'rotate-token', $A, '--grace-seconds', 604801], qr/graceSeconds must be an integer from 0 to 604800/],
    [['account', 'update', $A, '--max-keys', 0], qr/maxKeys must be an integer from 1/],
    [['key', 'show', $no_key], qr/no key \Q$no_key\E/],
    [['key', 'update', $no_key, '--name', 'x'], qr/no key \Q$no_key\E/],
    [['key', 'show', $K, '--account', $no_acc], qr/no key \Q$K\E/],
    [['key', 'roll', $K, '--account', $no_acc], qr/no key \Q$K\E/],
    [['account', 'show', $no_acc], qr/no account \Q$no_acc\E/],
    [['account', 'suspend', $no_acc], qr/no account \Q$no_acc\E/],
    [['account', 'set-plan', $A, 'no-such-plan'], qr/no plan "no-such-plan" \(PLAN_NOT_FOUND\)/],
    [['account', 'set-plan', $no_acc, 'none'], qr/no account \Q$no_acc\E/],
) {
    my ($args, $re) = @$case;
    my ($rc, $out, $err) = run_ctl_captured('--db', $db, '--json', @$args);
    is $rc, 1, "keyauthctl @$args: the store refuses, exit 1";
    like $err, qr/^keyauthctl: /, '... an error message';
    like $err, $re, '... the store\'s reason' or diag $err;
    unlike $err, qr/usage:/, '... no usage';
    is $out, '', '... nothing on stdout';
}

# nothing of the above changed the store
is store_state(), $before, 'no usage error wrote anything: key, account and audit trail as they were';
my ($rc, $out, $err) = run_ctl_captured('--db', $db, '--json', 'key', 'list', '--account', $A);
is $rc, 0, 'key list still works';
is scalar @{ JSON::PP::decode_json($out)->{keys} }, 1, 'still the one key';

# the valid forms
($rc, $out) = run_ctl_captured('--db', $db, 'account', 'list', '--json');
is $rc, 0, 'options after the command';
like $out, qr/"accounts"/, '... --json applies';
($rc, $out) = run_ctl_captured("--db=$db", '--json', 'account', 'create', '--name=--odd name', '--entitlement=60');
is $rc, 0, '--name=VALUE, also for a value that starts with "--"';
is JSON::PP::decode_json($out)->{name}, '--odd name', '... taken as it is';
($rc, $out) = run_ctl_captured('--db', $db, '--json', 'key', 'create', '--account', $A, '--name', 'two',
                               '--scope', 'ip:read', '--scope', 'geo:read', '--rate', 5, '--count', 2);
is $rc, 0, '--scope repeated';
is_deeply [sort @{ JSON::PP::decode_json($out)->{keys}[0]{scopes} }], ['geo:read', 'ip:read'], '... both scopes';
($rc, $out) = run_ctl_captured('--db', $db, '--json', 'fx', 'set', '--', '83.5');
is $rc, 0, '"--" ends the options';
($rc, undef, $err) = run_ctl_captured('--db', $db, 'fx', 'set', '-1');
is $rc, 2, 'fx set -1: exit 2';
like $err, qr/fx set takes RATE/, '... judged as a rate, not taken for an option';
($rc, $out) = run_ctl_captured('--db', $db, '--map-size', 64, '--json', 'fx', 'show');
is $rc, 0, '--map-size before the command';
{
    local $ENV{KEYAUTH_DB} = $db;
    ($rc, $out) = run_ctl_captured('--json', 'fx', 'show');
    is $rc, 0, '$KEYAUTH_DB instead of --db';
    like $out, qr/"83\.5"/, '... the same store';
}
for my $help ('-h', '--help') {
    ($rc, $out, $err) = run_ctl_captured('key', $help);
    is $rc, 0, "$help: exit 0";
    like $out, qr/^usage: keyauthctl/, "$help: the usage on stdout";
}

# keyauthd's command line is as strict; a valid one starts and stops on TERM.
{
    my $kd = KeyauthTest::build_dir() . '/keyauthd';
    my $port = KeyauthTest::free_port();
    my $run_kd = sub { run_daemon($kd, @_) };
    sub run_daemon {
        my ($kd, @args) = @_;
        my ($err) = $t->dir . '/kd.err';
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            open STDOUT, '>', '/dev/null' or die $!;
            open STDERR, '>', $err or die $!;
            exec { $kd } $kd, @args or die "exec: $!";
        }
        # a usage error exits at once; a valid line keeps running
        my $deadline = time + 10;
        my $done;
        while (time < $deadline) {
            if (waitpid($pid, POSIX::WNOHANG()) == $pid) { $done = $? >> 8; last }
            select undef, undef, undef, 0.05;
        }
        if (!defined $done) {
            kill TERM => $pid;
            waitpid $pid, 0;
        }
        open my $fh, '<', $err or die $!;
        local $/;
        return ($done, <$fh> // '');
    };
    my @good = ('--db', "$fresh-kd", '--listen', "127.0.0.1:$port");
    for my $case (
        [[@good, '--bogus'], qr/unknown argument "--bogus"/, 'an unknown option'],
        [[@good, '--db', "$fresh-kd"], qr/--db given twice/, '--db twice'],
        [[@good, '--listen', "127.0.0.1:$port"], qr/--listen given twice/, '--listen twice'],
        [['--db', "$fresh-kd"], qr/--listen needs HOST:PORT/, 'no --listen'],
        [['--db', "$fresh-kd", '--listen', "0.0.0.0:$port"], qr/not a loopback address; add --allow-remote/,
         'a non-loopback --listen without --allow-remote'],
        [['--db', "$fresh-kd", '--listen', "localhost:$port"], qr/not a loopback address/,
         'a host name is not taken for loopback'],
        [[@good, '--max-connections', 0], qr/--max-connections takes a number from 1 to 65536/, '--max-connections 0'],
        [[@good, '--max-connections', 'x'], qr/--max-connections takes/, '--max-connections x'],
        [[@good, "--db"], qr/--db needs a value/, "a missing value"],
        [[@good, '--etcd', 'http://127.0.0.1:1'], qr/give --db PATH or --etcd/, '--db and --etcd'],
        [['--listen', "127.0.0.1:$port"], qr/give --db PATH or --etcd/, 'neither --db nor --etcd'],
        [[@good, '--etcd-prefix', '/p'], qr/need --etcd/, '--etcd-prefix without --etcd'],
        [['--etcd', 'http://127.0.0.1:1', '--listen', "127.0.0.1:$port", '--map-size', 64],
         qr/--map-size is for an LMDB store/, '--map-size on etcd'],
        [[@good, '--trusted-proxy', 'localhost'], qr/--trusted-proxy takes IP addresses/,
         '--trusted-proxy with a host name'],
        [[@good, '--trusted-proxy', '127.0.0.1,'], qr/--trusted-proxy takes IP addresses/,
         '--trusted-proxy with an empty element'],
        [[@good, '--trusted-proxy', ''], qr/--trusted-proxy needs a value/, '--trusted-proxy ""'],
        [[@good, '--trusted-proxy', '127.0.0.1', '--trusted-proxy', '::1'], qr/--trusted-proxy given twice/,
         '--trusted-proxy twice'],
    ) {
        my ($args, $msg, $name) = @$case;
        my ($rc, $err) = $run_kd->(@$args);
        is $rc, 2, "keyauthd, $name: exit 2";
        like $err, $msg, "... says why";
        like $err, qr/usage: keyauthd/, '... with the usage';
    }
    ok !-e "$fresh-kd", 'no usage error created the store';
    my ($rc, $err);
    SKIP: {
        require IO::Socket::IP;
        skip 'no IPv6 loopback here', 1
            unless IO::Socket::IP->new(LocalHost => '::1', LocalPort => 0, Listen => 1);
        ($rc, $err) = $run_kd->('--db', "$fresh-kd", '--listen', "[::1]:$port");
        is $rc, undef, 'keyauthd --listen [::1]:PORT runs (loopback)' or diag $err;
    }
    # a port of its own: another test may have taken the one above meanwhile
    my $any = KeyauthTest::free_port();
    ($rc, $err) = $run_kd->('--db', "$fresh-kd", '--listen', "0.0.0.0:$any", '--allow-remote',
                            '--trusted-proxy', '127.0.0.1,::1');
    is $rc, undef, 'keyauthd --listen 0.0.0.0:PORT --allow-remote --trusted-proxy 127.0.0.1,::1 runs' or diag $err;
    like $err, qr/"event":"listening"/, '... and listens';
    like $err, qr/"trustedProxies":\["127\.0\.0\.1","::1"\]/, '... and says whose X-Real-IP it believes';
}

# keyauth-syncd's command line is as strict; nothing is created on a mistake.
{
    my $sd = KeyauthTest::build_dir() . '/keyauth-syncd';
    my $db = "$fresh-syncd";
    my @good = ('--etcd', 'http://127.0.0.1:1', '--db', $db);
    for my $case (
        [[@good, '--bogus'], qr/unknown argument "--bogus"|unknown option/, 'an unknown option'],
        [['--db', $db], qr/--etcd/, 'no --etcd'],
        [['--etcd', 'http://127.0.0.1:1'], qr/--db/, 'no --db'],
        [[@good, '--db', $db], qr/twice/, '--db twice'],
        [[@good, '--etcd-prefix', 'x'], qr/--etcd-prefix/, 'a prefix without "/"'],
        [['--etcd', 'ftp://x', '--db', $db], qr/etcd/, 'an endpoint that is not http(s)'],
        [[@good, '--metrics', '0.0.0.0:9'], qr/--allow-remote/, 'a non-loopback --metrics without --allow-remote'],
        [[@good, '--metrics'], qr/needs a value/, 'a missing value'],
    ) {
        my ($args, $msg, $name) = @$case;
        my ($rc, $err) = run_daemon($sd, @$args);
        is $rc, 2, "keyauth-syncd, $name: exit 2";
        like $err, $msg, '... says why' or diag $err;
        like $err, qr/usage: keyauth-syncd/, '... with the usage';
    }
    ok !-e $db, 'no store was created';
}

# Plans carry entitlements (issue 28): an account on a plan, its own values
# over the plan's, "plan" to follow it again, each an audit event.
{
    my $ctl_json = sub {
        my ($rc, $out, $err) = run_ctl_captured('--db', $db, '--json', @_);
        is $rc, 0, "keyauthctl @_" or diag $err;
        return $rc ? {} : JSON::PP::decode_json($out);
    };
    $ctl_json->('plans', 'import', $seed);
    is_deeply $ctl_json->('plans', 'show', 'trial-100')->{entitlements},
        { rateLimitPerMinute => 60, maxKeys => 1, quota => { units => 100, period => 'month' } },
        'plans show: the Trial states 100 units a month and 1 key';
    my $made = $ctl_json->('account', 'create', '--name', 'planned', '--plan', 'basic-1k');
    is_deeply [@$made{qw(planId rateLimitPerMinute maxKeys)}], ['basic-1k', 120, 5], 'account create --plan: the plan\'s values';
    is_deeply $made->{overrides}, [], '... none of them its own';
    my $P = $made->{id};
    my $shown = $ctl_json->('account', 'update', $P, '--quota', '50/day', '--entitlement', 7);
    is_deeply [@{ $shown->{quota} }{qw(units period used remaining)}], [50, 'day', 0, 50], '--quota 50/day: its own';
    is $shown->{rateLimitPerMinute}, 7, '--entitlement 7: its own';
    is_deeply [sort @{ $shown->{overrides} }], ['quota', 'rateLimitPerMinute'], '... listed as overrides';
    $shown = $ctl_json->('account', 'update', $P, '--quota', 'plan', '--entitlement', 'plan');
    is_deeply [@{ $shown->{quota} }{qw(units period)}], [1000, 'month'], '--quota plan: the plan\'s again';
    is $shown->{rateLimitPerMinute}, 120, '--entitlement plan: the plan\'s rate';
    $shown = $ctl_json->('account', 'set-plan', $P, 'trial-100');
    is_deeply [@$shown{qw(planId maxKeys)}, $shown->{quota}{units}], ['trial-100', 1, 100], 'set-plan trial-100';
    my $k = $ctl_json->('key', 'create', '--account', $P, '--name', 'one', '--scope', 'ip:read', '--rate', 600,
                        '--quota', '1/total');
    is_deeply [@{ $k->{quota} }{qw(units period resetsAt)}], [1, 'total', undef], 'key create --quota 1/total';
    is $k->{rateLimitPerMinute}, 60, '... its rate capped at the plan\'s';
    my ($rc, undef, $err) = run_ctl_captured('--db', $db, 'key', 'create', '--account', $P, '--name', 'two',
                                             '--scope', 'ip:read', '--rate', 5);
    is $rc, 1, 'a second key on the Trial: refused';
    like $err, qr/KEY_LIMIT_REACHED/, '... by the plan\'s cap';
    $shown = $ctl_json->('account', 'set-plan', $P, 'none');
    ok !defined $shown->{planId}, 'set-plan none';
    my @actions = map { $_->{action} } @{ $ctl_json->('audit', 'list', '--account', $P)->{events} };
    is_deeply [grep { /^account\./ } @actions],
        ['account.set_plan', 'account.set_plan', 'account.update', 'account.update', 'account.create'],
        'every change is an audit event';

    # issue 44 item 6: "plan" on an account with no plan dropped its own
    # value for the default (quota -> null: unlimited; 100 keys); refused
    my $planless = $ctl_json->('account', 'create', '--name', 'planless', '--entitlement', 10,
                               '--quota', '50/day', '--max-keys', 2);
    for my $opt (['--quota', 'plan'], ['--max-keys', 'plan'], ['--entitlement', 'plan']) {
        my ($rc, $out, $err) = run_ctl_captured('--db', $db, 'account', 'update', $planless->{id}, @$opt);
        is $rc, 2, "account update @$opt on an account with no plan: exit 2";
        like $err, qr/is on no plan.*ACCOUNT_HAS_NO_PLAN/, '... saying it has no plan to follow' or diag $err;
        is $out, '', '... nothing printed';
    }
    $shown = $ctl_json->('account', 'show', $planless->{id});
    is_deeply [@{ $shown->{quota} }{qw(units period)}, $shown->{maxKeys}], [50, 'day', 2], 'its own values stay';
    is_deeply [map { $_->{action} } @{ $ctl_json->('audit', 'list', '--account', $planless->{id})->{events} }],
        ['account.create'], '... and nothing was written';
}

# A bulk create shows its progress on a terminal (util-linux's script gives
# it one) and stays quiet in a script.
SKIP: {
    skip 'no script(1)', 4 unless -x '/usr/bin/script';
    my $bulk = KeyauthTest->new;
    my $acc = $bulk->account(entitlement => 100);
    my $ctl = KeyauthTest::build_dir() . '/keyauthctl';
    my $dir = $bulk->dir;
    my @cmd = ($ctl, '--db', $bulk->db, 'key', 'create', '--account', $acc->{id}, '--name', 'bulk',
               '--scope', 'ip:read', '--rate', '10', '--count', '70000');
    my $line = join ' ', @cmd;
    # script copies the terminal to its own output too: not into the TAP stream
    system("/usr/bin/script -qec '$line > $dir/keys.out' $dir/typescript </dev/null >/dev/null 2>&1") == 0
        or diag 'script failed';
    my $tty = do { local (@ARGV, $/) = ("$dir/typescript"); <> } // '';
    like $tty, qr/keyauthctl: 65536 of 70000 keys made \(93%\)/, 'on a terminal: how many are made';
    like $tty, qr/keyauthctl: 70000 of 70000 keys committed \(100%\)/, '... and when they are committed';
    my $err = `$line 2>&1 >/dev/null`;
    is $err, '', 'in a script: nothing on stderr';
    my $keys = () = do { local (@ARGV, $/) = ("$dir/keys.out"); <> } =~ /ka_[0-9A-Za-z]{30,}/g;
    is $keys, 70000, 'every secret on standard output, none in the progress';
}

done_testing;
