# The key lifecycle through keyauthctl (issue #16), on both stores: LMDB
# (--db) and a real etcd member (--etcd). Expiry, show, update, roll with and
# without grace, the refusals by code (KEY_ALREADY_ROLLED, KEY_REVOKED,
# KEY_LIMIT_REACHED, SCOPE_NOT_ALLOWED, ACCOUNT_SUSPENDED), suspend/resume,
# console-token rotation (checked against a real keyauthd), and the audit
# trail: newest first, the operator named (by $SUDO_USER only under sudo as
# root), no secret or token anywhere in it. Then keyauthctl is SIGKILLed at
# random points of its updates and rolls, and the store still opens and reads
# whole. Names and actors that hold terminal controls print escaped.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Encode ();
use POSIX ();
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);
use EtcdCluster;
use KeyauthTest qw(http_request);

# whom keyauthctl names: the login sudo was called from, only under sudo as
# root (anyone can set SUDO_USER), else the real uid's login
my $LOGIN = (getpwuid($<))[0];
my $OPERATOR = $< == 0 && defined $ENV{SUDO_UID} && length($ENV{SUDO_USER} // '') ? $ENV{SUDO_USER} : $LOGIN;

sub iso { POSIX::strftime('%Y-%m-%dT%H:%M:%SZ', gmtime $_[0]) }
# "2030-01-01T00:00:00.000Z" -> epoch seconds (fraction kept)
sub epoch {
    my ($y, $mo, $d, $h, $mi, $s, $f) = $_[0] =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z$/ or return;
    return timegm($s, $mi, $h, $d, $mo - 1, $y) + "0.$f";
}

# A refusal by the store: exit 1, its code in the message, nothing on stdout.
sub refused {
    my ($t, $code, $what, @args) = @_;
    my ($rc, $json, $err) = $t->ctl_raw(@args);
    is $rc, 1, "$what: exit 1";
    like $err, qr/\($code\)$/m, "... $code" or diag $err;
    ok !defined $json, '... nothing on stdout';
}

sub console_get {
    my ($t, $token) = @_;
    return http_request($t->keyauthd_port, GET => '/v1/keys', "Authorization: Bearer $token")->{status};
}

sub lifecycle {
    my ($t) = @_;
    my @secrets;    # every secret and token this test is shown
    my @actions;    # the audit trail account A should have, oldest first

    my $acc = $t->ctl('account', 'create', '--name', 'life', '--entitlement', 600);
    push @secrets, $acc->{consoleToken};
    push @actions, 'account.create';
    my $A = $acc->{id};

    # create with an expiry, in UTC or with an offset
    my $in30 = time + 30 * 86400;
    my $k = $t->ctl('key', 'create', '--account', $A, '--name', 'first', '--scope', 'ip:read',
                    '--rate', 100, '--expires-at', iso($in30));
    push @secrets, $k->{secret};
    push @actions, 'key.create';
    is $k->{expiresAt}, iso($in30) =~ s/Z$/.000Z/r, 'key create --expires-at: the expiry, UTC with ms';
    is $k->{status}, 'active', '... active';
    my $K = $k->{id};
    my $off = $t->ctl('key', 'create', '--account', $A, '--name', 'offset', '--scope', 'ip:read',
                      '--rate', 100, '--expires-at', '2031-06-01T05:30:00+05:30');
    push @secrets, $off->{secret};
    push @actions, 'key.create';
    is $off->{expiresAt}, '2031-06-01T00:00:00.000Z', '--expires-at with an offset is stored as UTC';

    # show
    my $s = $t->ctl('key', 'show', $K);
    is_deeply [@$s{qw(id name scopes requestedRateLimitPerMinute expiresAt status)}],
              [$K, 'first', ['ip:read'], 100, $k->{expiresAt}, 'active'], 'key show: the key';
    ok !exists $s->{secret}, '... and never its secret';
    is $t->ctl('key', 'show', $K, '--account', $A)->{id}, $K, 'key show --account of its owner';
    my $other = $t->ctl('account', 'create', '--name', 'other', '--entitlement', 60);
    push @secrets, $other->{consoleToken};
    my ($rc, $json, $err) = $t->ctl_raw('key', 'show', $K, '--account', $other->{id});
    is $rc, 1, 'key show --account of another account: exit 1';
    like $err, qr/no key \Q$K\E/, '... no key';

    # update: each field alone, then expiry cleared
    is $t->ctl('key', 'update', $K, '--name', 'renamed')->{name}, 'renamed', 'key update --name';
    is_deeply $t->ctl('key', 'update', $K, '--scope', 'ip:read', '--scope', 'geo:read')->{scopes},
              ['ip:read', 'geo:read'], 'key update --scope, twice';
    my $u = $t->ctl('key', 'update', $K, '--rate', 900, '--account', $A);
    is $u->{requestedRateLimitPerMinute}, 900, 'key update --rate';
    is $u->{rateLimitPerMinute}, 600, '... capped at the entitlement';
    is $t->ctl('key', 'update', $K, '--expires-at', '2032-01-01T00:00:00Z')->{expiresAt},
       '2032-01-01T00:00:00.000Z', 'key update --expires-at T';
    my $never = $t->ctl('key', 'update', $K, '--expires-at', 'never');
    is $never->{expiresAt}, undef, 'key update --expires-at never';
    is $never->{id}, $K, '... the same key';
    push @actions, ('key.update') x 5;
    my ($trc, $text) = $t->ctl_text('key', 'update', $K, '--name', 'first');
    is $trc, 0, 'key update in text';
    like $text, qr/^key \Q$K\E updated\n\Q$K\E  \S+\.\.\.  active  600\/min  ip:read,geo:read  first\n\z/,
         '... says so, with the key line';
    push @actions, 'key.update';

    # roll with grace: the successor with its secret, once
    my $before = time;
    my $r = $t->ctl('key', 'roll', $K, '--grace-seconds', 300);
    my $after = time;
    push @secrets, $r->{secret};
    push @actions, 'key.roll';
    like $r->{secret}, qr/^ka_/, 'key roll: the successor with its secret';
    isnt $r->{secret}, $k->{secret}, '... a new secret';
    isnt $r->{id}, $K, '... a new id';
    is $r->{rolledFrom}, $K, '... rolledFrom the old key';
    is_deeply [@$r{qw(name scopes requestedRateLimitPerMinute expiresAt status)}],
              ['first', ['ip:read', 'geo:read'], 900, undef, 'active'], '... same name, scopes, rate and expiry';
    my $old = $t->ctl('key', 'show', $K);
    is $old->{rolledTo}, $r->{id}, 'the predecessor shows rolledTo';
    my $stops = epoch($old->{expiresAt});
    ok $stops >= int($before) + 300 && $stops <= $after + 301, "... and stops after the grace ($old->{expiresAt})";
    is $old->{status}, 'active', '... active until then';
    is_deeply $r->{predecessor}, $old, '--json gives the predecessor as it was left';
    refused($t, 'KEY_ALREADY_ROLLED', 'roll the predecessor again', 'key', 'roll', $K);

    # roll without grace, in text: the predecessor is revoked now
    ($trc, $text, $err) = $t->ctl_text('key', 'roll', $r->{id});
    is $trc, 0, 'key roll in text' or diag $err;
    my ($R2, $secret2) = $text =~ /^key (key_\w+) created\nsecret \(shown once\): (ka_\w+)\nkey \Q$r->{id}\E revoked now\n\z/;
    ok $R2 && $secret2, '... the successor, its secret once, and "revoked now"' or diag $text;
    push @secrets, $secret2;
    push @actions, 'key.roll';
    is $t->ctl('key', 'show', $r->{id})->{status}, 'revoked', '... revoked it is';
    ($trc, $text) = $t->ctl_text('key', 'roll', $R2, '--grace-seconds', 60);
    like $text, qr/^key \Q$R2\E stops at \d{4}-\d\d-\d\dT[\d:.]+Z$/m, 'a roll with grace says when the old key stops';
    my ($R3) = $text =~ /^key (key_\w+) created$/m;
    push @secrets, $text =~ /\(shown once\): (ka_\w+)/;
    push @actions, 'key.roll';

    # revoke, then update and roll are refused
    is $t->ctl('key', 'revoke', $R3)->{status}, 'revoked', 'key revoke';
    push @actions, 'key.revoke';
    refused($t, 'KEY_REVOKED', 'key update of a revoked key', 'key', 'update', $R3, '--name', 'x');
    refused($t, 'KEY_REVOKED', 'key roll of a revoked key', 'key', 'roll', $R3);

    # account controls
    my $up = $t->ctl('account', 'update', $A, '--name', 'life2', '--entitlement', 50, '--max-keys', 2);
    push @actions, 'account.update';
    is_deeply [@$up{qw(name entitlementPerMinute maxKeys)}], ['life2', 50, 2], 'account update --name --entitlement --max-keys';
    is $t->ctl('key', 'show', $off->{id})->{rateLimitPerMinute}, 50, '... the new entitlement caps the keys at once';
    # active now: "offset", and K and R2 in their grace
    refused($t, 'KEY_LIMIT_REACHED', 'a key past --max-keys 2', 'key', 'create', '--account', $A,
            '--name', 'third', '--scope', 'ip:read', '--rate', 5);
    $t->ctl('account', 'update', $A, '--max-keys', 10, '--allowed-scope', 'ip:*');
    push @actions, 'account.update';
    refused($t, 'SCOPE_NOT_ALLOWED', 'a scope outside --allowed-scope', 'key', 'create', '--account', $A,
            '--name', 'geo', '--scope', 'geo:read', '--rate', 5);
    my $ip = $t->ctl('key', 'create', '--account', $A, '--name', 'ip', '--scope', 'ip:read', '--rate', 5);
    push @secrets, $ip->{secret};
    push @actions, 'key.create';
    refused($t, 'SCOPE_NOT_ALLOWED', 'key update to a scope outside --allowed-scope',
            'key', 'update', $ip->{id}, '--scope', 'geo:read');
    is $t->ctl('account', 'update', $A, '--any-scope')->{allowedScopes}, undef, 'account update --any-scope';
    push @actions, 'account.update';
    is_deeply $t->ctl('key', 'update', $ip->{id}, '--scope', 'geo:read')->{scopes}, ['geo:read'], '... any scope again';
    push @actions, 'key.update';
    is $t->ctl('account', 'set-entitlement', '--account', $A, '--entitlement', 70)->{entitlementPerMinute}, 70,
       'account set-entitlement still works';
    push @actions, 'account.update';
    my $shown = $t->ctl('account', 'show', $A);
    is_deeply [@$shown{qw(id name entitlementPerMinute maxKeys allowedScopes status)}],
              [$A, 'life2', 70, 10, undef, 'active'], 'account show';

    # suspend and resume
    is $t->ctl('account', 'suspend', $A)->{status}, 'suspended', 'account suspend';
    push @actions, 'account.suspend';
    is $t->ctl('account', 'suspend', $A)->{status}, 'suspended', '... again: no change, no event';
    refused($t, 'ACCOUNT_SUSPENDED', 'a key of a suspended account', 'key', 'create', '--account', $A,
            '--name', 'x', '--scope', 'ip:read', '--rate', 5);
    refused($t, 'ACCOUNT_SUSPENDED', 'a key update in a suspended account', 'key', 'update', $ip->{id}, '--name', 'y');
    is $t->ctl('account', 'resume', $A)->{status}, 'active', 'account resume';
    push @actions, 'account.resume';
    is $t->ctl('key', 'update', $ip->{id}, '--name', 'y')->{name}, 'y', '... and its keys change again';
    push @actions, 'key.update';

    # rotate-token, checked against keyauthd
    $t->start_keyauthd;
    my $tok0 = $acc->{consoleToken};
    is console_get($t, $tok0), 200, 'the first console token works';
    my $rot = $t->ctl('account', 'rotate-token', $A);
    push @actions, 'account.rotate_token';
    my $tok1 = $rot->{consoleToken};
    push @secrets, $tok1;
    like $tok1, qr/^kac_/, 'account rotate-token prints the new console token';
    is $rot->{id}, $A, '... of the account';
    is console_get($t, $tok0), 401, '... the old one is refused by keyauthd at once';
    is console_get($t, $tok1), 200, '... the new one works';
    ($trc, $text) = $t->ctl_text('account', 'rotate-token', $A, '--grace-seconds', 120);
    push @actions, 'account.rotate_token';
    my ($tok2) = $text =~ /new console token \(shown once\): (kac_\w+)$/m;
    ok $tok2, 'rotate-token in text: the token once' or diag $text;
    push @secrets, $tok2;
    like $text, qr/^the previous token stops at about \S+Z$/m, '... and when the old one stops';
    is console_get($t, $tok1), 200, '... the old one still works in its grace';
    is console_get($t, $tok2), 200, '... and the new one';
    $t->stop_keyauthd;

    # the audit trail
    my $trail = $t->ctl('audit', 'list', '--account', $A, '--limit', 1000);
    my @events = @{ $trail->{events} };
    is_deeply [map { $_->{action} } @events], [reverse @actions],
              'audit list --account: every change, newest first, none for a refusal' or diag explain [map { $_->{action} } @events];
    is $trail->{nextCursor}, undef, '... all on one page';
    my @at = map { epoch($_->{at}) } @events;
    ok !(grep { $at[$_] < $at[$_ + 1] } 0 .. $#at - 1), '... in time order, newest first';
    is_deeply [map { $_->{actor} } @events], [({ type => 'operator', user => $OPERATOR }) x @events],
              "... each by the operator ($OPERATOR)";
    is_deeply [map { $_->{address} } @events], [('local') x @events], '... from "local"';
    my ($roll) = grep { $_->{action} eq 'key.roll' } reverse @events;
    is_deeply [$roll->{target}, $roll->{changes}{rolledTo}{to}], [{ type => 'key', id => $K }, $r->{id}],
              'key.roll names the key and its successor';
    my ($rot_ev) = grep { $_->{action} eq 'account.rotate_token' } @events;
    is $rot_ev->{target}{id}, $A, 'account.rotate_token is in the account\'s trail';

    # paging gives the same events
    my (@paged, $cursor);
    while (1) {
        my $p = $t->ctl('audit', 'list', '--account', $A, '--limit', 4, $cursor ? ('--cursor', $cursor) : ());
        push @paged, @{ $p->{events} };
        last unless $cursor = $p->{nextCursor};
    }
    is_deeply [map { $_->{id} } @paged], [map { $_->{id} } @events], 'audit list --limit 4 --cursor: the same, page by page';

    # in text: one line per event
    ($trc, $text) = $t->ctl_text('audit', 'list', '--account', $A);
    my @lines = split /\n/, $text;
    is scalar @lines, scalar @events, 'audit list in text: one line per event';
    like $lines[0], qr/^\S+Z  operator:\Q$OPERATOR\E  account\.rotate_token  account \Q$A\E  graceSeconds: null -> 120$/,
         '... time, actor, action, target, changes';

    # no secret or token shown in this test is anywhere in the trail
    my $everything = join "\n", map { ($t->ctl_text(@$_))[1] }
        ['--json', 'audit', 'list', '--account', $A, '--limit', 1000], ['--json', 'audit', 'list', '--limit', 1000],
        ['audit', 'list', '--limit', 1000];
    ok length $everything > 1000, 'the whole trail, in JSON and text';
    is scalar(@secrets), 10, 'every secret and token of the test collected';
    for my $secret (@secrets) {
        ok index($everything, $secret) < 0 && index($everything, substr($secret, 12)) < 0,
           'not in the audit trail: ' . substr($secret, 0, 12) . '...';
    }

    # SUDO_USER without sudo: anyone can set it, so it names no one
    {
        local $ENV{SUDO_USER} = 'ops-mallory';
        delete local $ENV{SUDO_UID};
        $t->ctl('account', 'update', $A, '--name', 'not by sudo');
    }
    is_deeply $t->ctl('audit', 'list', '--account', $A, '--limit', 1)->{events}[0]{actor},
              { type => 'operator', user => $LOGIN }, "SUDO_USER set but no sudo: the real login ($LOGIN)";
    # another operator, by sudo (as root, as sudo runs it)
    SKIP: {
        skip 'not root: running under sudo as root cannot be played', 1 unless $< == 0;
        {
            local $ENV{SUDO_USER} = 'ops-alice';
            local $ENV{SUDO_UID} = 1000;
            $t->ctl('account', 'update', $A, '--name', 'by sudo');
        }
        is_deeply $t->ctl('audit', 'list', '--account', $A, '--limit', 1)->{events}[0]{actor},
                  { type => 'operator', user => 'ops-alice' }, 'under sudo as root, the login sudo was called from';
    }
}

# ESC [31m, the C1 control CSI (U+009B) and RIGHT-TO-LEFT OVERRIDE (U+202E)
# in UTF-8, and how keyauthctl's text shows them
my $EVIL = "\e[31mred\xc2\x9bc1\xe2\x80\xaeevil";
my $EVIL_SHOWN = '\u001b[31mred\u009bc1\u202eevil';

# Writes $to over every $from (as long) in the values of an LMDB table, as
# a store written before names were checked, or by hand, may hold them:
# keyauthctl and keyauthd refuse such names.
sub forge_lmdb {
    my ($dir, $table, $from, $to) = @_;
    die 'same length only' unless length $from == length $to;
    my ($hex_from, $hex_to) = map { unpack 'H*', $_ } $from, $to;
    open my $in, '-|', 'mdb_dump', '-s', $table, $dir or die "mdb_dump: $!";
    my ($dump, $n) = ('', 0);
    while (my $line = <$in>) {
        $n += $line =~ s/\Q$hex_from\E/$hex_to/g if $line =~ /^ /;
        $dump .= $line;
    }
    close $in or die "mdb_dump -s $table failed";
    open my $out, '|-', 'mdb_load', '-s', $table, $dir or die "mdb_load: $!";
    print $out $dump;
    close $out or die "mdb_load -s $table failed";
    return $n;
}

# Text output never passes a terminal control through: names, the actor of
# an audit event and a change's values print escaped; --json stays JSON.
sub terminal_escapes {
    my ($t) = @_;
    # '~' is in no key prefix (base62): a prefix ending in the placeholder's
    # character would take the forgery one byte early
    my $placeholder = '~' x length $EVIL;
    my $A = $t->ctl('account', 'create', '--name', $placeholder, '--entitlement', 600)->{id};
    my $K = $t->ctl('key', 'create', '--account', $A, '--name', $placeholder, '--scope', 'ip:read',
                    '--rate', 60)->{id};
    my ($rc, undef, $err) = $t->ctl_raw('key', 'update', $K, '--name', $EVIL);
    is $rc, 1, 'such a name is refused on the way in' or diag $err;
    is forge_lmdb($t->db, 'accounts', $placeholder, $EVIL), 1, 'the account renamed in the store by hand';
    is forge_lmdb($t->db, 'key_records', $placeholder, $EVIL), 1, '... and the key';

    my $text;
    ($rc, $text) = $t->ctl_text('account', 'list');
    my ($line) = grep { /^\Q$A\E / } split /\n/, $text;
    is $line, "$A  600/min  active  $EVIL_SHOWN", 'account list: the name escaped';
    ($rc, $text) = $t->ctl_text('account', 'show', $A);
    like $text, qr/^\Q$A\E  600\/min  active  \Q$EVIL_SHOWN\E$/m, 'account show: the same';
    ($rc, $text) = $t->ctl_text('key', 'list', '--account', $A);
    like $text, qr/^\Q$K\E  ka_\S+\.\.\.  active  60\/min  ip:read  \Q$EVIL_SHOWN\E$/, 'key list: the name escaped';
    ($rc, $text) = $t->ctl_text('key', 'show', $K);
    like $text, qr/^\Q$K\E .*  \Q$EVIL_SHOWN\E$/m, 'key show: the same';

    # the trail: a rename away from the forged name, then an operator whose
    # SUDO_USER (believed under sudo as root) holds the same controls
    $t->ctl('key', 'update', $K, '--name', 'calm');
    {
        local $ENV{SUDO_USER} = $EVIL;
        local $ENV{SUDO_UID} = 0;
        $t->ctl('account', 'update', $A, '--name', 'calm too');
    }
    my $actor_shown = $< == 0 ? $EVIL_SHOWN : $LOGIN;
    ($rc, $text) = $t->ctl_text('audit', 'list', '--account', $A, '--limit', 2);
    my @lines = split /\n/, $text;
    like $lines[1], qr/^\S+Z  operator:\Q$OPERATOR\E  key\.update  key \Q$K\E  name: "\Q$EVIL_SHOWN\E" -> "calm"$/,
         'audit list: the old name escaped in the change';
    like $lines[0], qr/^\S+Z  operator:\Q$actor_shown\E  account\.update  account \Q$A\E  name: "\Q$EVIL_SHOWN\E" -> "calm too"$/,
         $< == 0 ? '... and the actor SUDO_USER named under sudo as root' : '... and the account\'s old name';
    unlike join('', map { ($t->ctl_text(@$_))[1] } ['account', 'list'], ['key', 'list', '--account', $A],
                ['audit', 'list', '--account', $A]),
           qr/[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80\xae/, 'no control character in any of it';
    my $events = $t->ctl('audit', 'list', '--account', $A, '--limit', 2)->{events};
    is $events->[1]{changes}{name}{from}, Encode::decode('UTF-8', $EVIL), '--json: the name as stored, in JSON';
}

# keyauthctl SIGKILLed at random points of key update and key roll; then
# the store opens, lists and reads every key whole.
sub killed_writes {
    my ($t, $lmdb) = @_;
    my $acc = $t->account(name => 'kill9');
    my $A = $acc->{id};
    $t->key(account => $A, name => "k$_") for 1 .. 3;
    # how long one keyauthctl takes here: the fastest of three, as one run
    # slowed by a busy moment would make most kills come after the end
    my $run;
    for (1 .. 3) {
        my $t0 = time;
        $t->ctl('key', 'list', '--account', $A);
        my $took = time - $t0;
        $run = $took if !defined $run || $took < $run;
    }
    my ($killed, $finished) = (0, 0);
    for my $i (1 .. 30) {
        my @heads = grep { !$_->{rolledTo} && $_->{status} eq 'active' }
                    @{ $t->ctl('key', 'list', '--account', $A)->{keys} };
        my $target = $heads[rand @heads]{id};
        my @args = $i % 2 ? ('key', 'update', $target, '--name', "n$i", '--rate', 100 + $i)
                          : ('key', 'roll', $target, '--grace-seconds', $i % 4 ? 0 : 600);
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            open STDOUT, '>', '/dev/null' or die $!;
            open STDERR, '>', '/dev/null' or die $!;
            KeyauthTest::no_leak_check_before_kill();
            exec { $t->{ctl} } $t->{ctl}, $t->store_args, @args or die "exec: $!";
        }
        sleep rand($run * 1.5);
        kill KILL => $pid;
        waitpid $pid, 0;
        ($? & 127) == 9 ? $killed++ : $finished++;
    }
    note "keyauthctl killed $killed times, finished $finished times";
    ok $killed >= 3, "keyauthctl was killed mid-run ($killed of 30)";

    my ($rc, $list, $err) = $t->ctl_raw('key', 'list', '--account', $A);
    is $rc, 0, 'after the kills: the store opens and key list works' or diag $err;
    my @keys = @{ $list->{keys} // [] };
    ok @keys >= 3, 'every key listed (' . scalar(@keys) . ')';
    my %by_id = map { $_->{id} => $_ } @keys;
    my $bad = 0;
    for my $k (@keys) {
        my ($src, $shown) = $t->ctl_raw('key', 'show', $k->{id});
        $bad++ unless $src == 0 && $shown->{id} eq $k->{id};
        # a roll is one write: the successor exists and points back
        $bad++ if $k->{rolledTo} && ($by_id{ $k->{rolledTo} }{rolledFrom} // '') ne $k->{id};
    }
    is $bad, 0, 'every key record reads, and every roll chain is whole';
    ($rc, undef, $err) = $t->ctl_raw('audit', 'list', '--account', $A);
    is $rc, 0, 'the audit trail reads' or diag $err;
    ($rc, undef, $err) = $t->ctl_raw('key', 'update', $keys[-1]{id}, '--name', 'after');
    is $rc, 0, 'and takes a write' or diag $err;
    if ($lmdb) {
        ($rc, my $doc, $err) = $t->ctl_raw('doctor');
        is $rc, 0, 'keyauthctl doctor passes' or diag explain $doc;
    }
}

my $etcd = EtcdCluster->new(members => 1);
for my $backend (['LMDB (--db)', KeyauthTest->new, 1], ['etcd (--etcd)', KeyauthTest->new(etcd => $etcd->endpoints), 0]) {
    my ($name, $t, $lmdb) = @$backend;
    subtest "$name: the lifecycle" => sub { lifecycle($t) };
    subtest "$name: SIGKILL during key update and key roll" => sub { killed_writes($t, $lmdb) };
    subtest "$name: names and actors print escaped" => sub { terminal_escapes($t) } if $lmdb;
}

done_testing;
