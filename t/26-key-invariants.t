# The key and account invariants (admin/lib/key_rules.h) through every
# public way in: the console API behind nginx, keyauthctl, and the edge's
# verdict, in both modes (single host; keyauthd on etcd with keyauth-syncd
# feeding the edge). Each case is one of issue 26's leaks, tried as a user
# would: an expired key revived past maxKeys, a rolled predecessor revived,
# a roll past a lowered cap or outside allowedScopes, the epoch read as
# "never", and a resume past the cap; and a roll chain counting once toward
# the cap, with two live secrets at most (issue 44).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time);
use EtcdCluster;
use KeyauthTest qw(wait_until rfc3339);

my $LOCATIONS = <<'LOC';
        keyauth on;
        location /v1/ip/ { keyauth_scope ip:read; proxy_pass http://tool; }
LOC

sub run_mode {
    my ($mode, %opt) = @_;
    my $t = KeyauthTest->new(%opt);
    my $acc = $t->account(name => "invariants-$mode", entitlement => 10_000_000, max_keys => 1);
    $t->start_console_stack(locations => $LOCATIONS);
    my $tok = $acc->{consoleToken};
    my $api = $t->console_client($tok);
    my $edge = sub { $t->request(GET => '/v1/ip/192.0.2.1', "Authorization: Bearer $_[0]")->{status} };
    # single host: at once; many edges: within the propagation bound
    my $becomes = sub {
        my ($secret, $status, $what) = @_;
        ok wait_until(sub { $edge->($secret) == $status }, 15, $what), $what;
    };
    # A refused write changes nothing at the edge. On etcd, a later write
    # seen at the edge proves the edge has caught up past the refusal.
    my $markers = $t->account(name => "markers-$mode");
    my $caught_up = sub {
        return unless $opt{etcd};
        my $marker = $t->key(account => $markers->{id}, name => 'marker');
        $becomes->($marker->{secret}, 200, 'a later write reached the edge: it has applied everything before');
    };
    my $ctl_refused = sub {
        my ($code, $what, @args) = @_;
        my ($rc, undef, $stderr) = $t->ctl_raw(@args);
        is $rc, 1, "keyauthctl @args[0,1]: refused ($what)";
        like $stderr, qr/\Q$code\E/, "... with $code" or diag $stderr;
    };

    subtest "$mode: an expired key made active again counts against maxKeys" => sub {
        my $expires = time + 4;
        my $first = $api->(POST => '/v1/keys', { name => 'first', scopes => ['ip:read'], rateLimitPerMinute => 600,
                                                 expiresAt => rfc3339($expires) });
        is $first->{status}, 201, 'a key expiring in 4 s' or diag $first->{body};
        # on many edges a key the edge has not heard of yet is 401 too: wait
        # for its expiry as well, not only for a 401
        ok wait_until(sub { time > $expires + 0.2 && $edge->($first->{json}{secret}) == 401 }, 30,
                      'its expiry'), 'it expires at the edge';
        my $second = $api->(POST => '/v1/keys', { name => 'second', scopes => ['ip:read'], rateLimitPerMinute => 600 });
        is $second->{status}, 201, 'a second key: the first no longer counts' or diag $second->{body};
        $becomes->($second->{json}{secret}, 200, 'the second works');
        my $revive = $api->(PATCH => "/v1/keys/$first->{json}{id}", { expiresAt => undef });
        is $revive->{status}, 409, 'PATCH expiresAt: null on the expired key is refused';
        is $revive->{code}, 'KEY_LIMIT_REACHED', 'KEY_LIMIT_REACHED';
        $revive = $api->(PATCH => "/v1/keys/$first->{json}{id}", { expiresAt => rfc3339(time + 3600) });
        is $revive->{code}, 'KEY_LIMIT_REACHED', 'so is moving its expiry ahead';
        $ctl_refused->('KEY_LIMIT_REACHED', 'expiry cleared past the cap',
                       'key', 'update', $first->{json}{id}, '--expires-at', 'never');
        $caught_up->();
        is $edge->($first->{json}{secret}), 401, 'the expired key stays refused at the edge';
        is $edge->($second->{json}{secret}), 200, 'the other works';
        my $third = $api->(POST => '/v1/keys', { name => 'third', scopes => ['ip:read'], rateLimitPerMinute => 600 });
        like $third->{body}, qr/has 1 active key, its limit is 1/, 'the account still has one active key';
        $t->{invariants_second} = $second->{json};
    };

    subtest "$mode: a roll chain counts once: a cap of one rotates without downtime" => sub {
        my $key = $t->{invariants_second};
        my $roll = $api->(POST => "/v1/keys/$key->{id}/roll", { gracePeriodSeconds => 60 });
        is $roll->{status}, 201, 'a roll with grace at a cap of one: both secrets are one key (it was 409)'
            or diag $roll->{body};
        $becomes->($roll->{json}{secret}, 200, 'the successor works');
        is $edge->($key->{secret}), 200, 'the predecessor works in its grace';
        my $beside = $api->(POST => '/v1/keys', { name => 'beside', scopes => ['ip:read'], rateLimitPerMinute => 600 });
        is $beside->{code}, 'KEY_LIMIT_REACHED', 'no other key beside the chain';
        my $again = $t->ctl('key', 'roll', $roll->{json}{id}, '--grace-seconds', 60);
        ok $again->{secret}, 'keyauthctl rolls the successor in the first one\'s grace';
        $becomes->($again->{secret}, 200, 'the newest works');
        $becomes->($key->{secret}, 401, 'the first secret stops at once: two live secrets a chain at most');
        is $edge->($roll->{json}{secret}), 200, 'the middle one is in its grace';
        is $api->(GET => "/v1/keys/$key->{id}")->{json}{status}, 'expired', 'the console says the first expired';
        $t->{invariants_second} = $again;
    };

    subtest "$mode: a roll is held to a lowered cap and to allowedScopes" => sub {
        my $key = $t->{invariants_second};
        $t->ctl('account', 'update', $acc->{id}, '--max-keys', 2);
        my $other = $api->(POST => '/v1/keys', { name => 'other', scopes => ['ip:read'], rateLimitPerMinute => 600 });
        is $other->{status}, 201, 'a second chain under a cap of two' or diag $other->{body};
        $t->ctl('account', 'update', $acc->{id}, '--max-keys', 1);
        my $roll = $api->(POST => "/v1/keys/$key->{id}/roll", { gracePeriodSeconds => 60 });
        is $roll->{status}, 409, 'two chains over a lowered cap of one: no roll';
        is $roll->{code}, 'KEY_LIMIT_REACHED', 'KEY_LIMIT_REACHED';
        $ctl_refused->('KEY_LIMIT_REACHED', 'over a lowered cap', 'key', 'roll', $key->{id}, '--grace-seconds', 60);
        is $api->(POST => "/v1/keys/$other->{json}{id}/revoke")->{status}, 200, 'the other chain revoked';
        $t->ctl('account', 'update', $acc->{id}, '--allowed-scope', 'geo:read');
        $roll = $api->(POST => "/v1/keys/$key->{id}/roll", { gracePeriodSeconds => 0 });
        is $roll->{status}, 403, 'a roll copying a scope no longer allowed';
        is $roll->{code}, 'SCOPE_NOT_ALLOWED', 'SCOPE_NOT_ALLOWED';
        $ctl_refused->('SCOPE_NOT_ALLOWED', 'a scope no longer allowed', 'key', 'roll', $key->{id});
        $t->ctl('account', 'update', $acc->{id}, '--any-scope', '--max-keys', 3);
        $caught_up->();
        is $edge->($key->{secret}), 200, 'the key is untouched by the refused rolls';
    };

    subtest "$mode: a rolled predecessor never comes back" => sub {
        my $key = $t->{invariants_second};
        my $roll = $api->(POST => "/v1/keys/$key->{id}/roll", { gracePeriodSeconds => 2 });
        is $roll->{status}, 201, 'rolled with 2 s of grace' or diag $roll->{body};
        $becomes->($roll->{json}{secret}, 200, 'the successor works');
        $becomes->($key->{secret}, 401, 'the predecessor stops after its grace');
        my $revive = $api->(PATCH => "/v1/keys/$key->{id}", { expiresAt => undef });
        is $revive->{status}, 409, 'PATCH expiresAt: null on the predecessor is refused';
        is $revive->{code}, 'KEY_ALREADY_ROLLED', 'KEY_ALREADY_ROLLED';
        $ctl_refused->('KEY_ALREADY_ROLLED', 'a predecessor revived', 'key', 'update', $key->{id}, '--expires-at', 'never');
        $caught_up->();
        is $edge->($key->{secret}), 401, 'the old secret stays refused';
        is $api->(GET => "/v1/keys/$key->{id}")->{json}{status}, 'expired', 'the console says expired';
        $t->{invariants_successor} = $roll->{json};
    };

    subtest "$mode: the epoch is a time in the past, never \"no expiry\"" => sub {
        my $res = $api->(POST => '/v1/keys', { name => 'epoch', scopes => ['ip:read'], rateLimitPerMinute => 600,
                                               expiresAt => '1970-01-01T00:00:00Z' });
        is $res->{status}, 400, 'create with the epoch: 400';
        is $res->{json}{error}{field}, 'expiresAt', 'naming expiresAt';
        my $key = $t->{invariants_successor};
        my $later = rfc3339(time + 3600);
        is $api->(PATCH => "/v1/keys/$key->{id}", { expiresAt => $later })->{status}, 200, 'an expiry an hour ahead';
        $res = $api->(PATCH => "/v1/keys/$key->{id}", { expiresAt => '1970-01-01T00:00:00Z' });
        is $res->{status}, 400, 'PATCH with the epoch: 400, not "clear the expiry"';
        is $api->(GET => "/v1/keys/$key->{id}")->{json}{expiresAt}, $later, 'the expiry stays';
        my ($rc, undef, $stderr) = $t->ctl_raw('key', 'update', $key->{id}, '--expires-at', '1970-01-01T00:00:00Z');
        isnt $rc, 0, 'keyauthctl refuses the epoch too';
        like $stderr, qr/future/, '... as a time in the past' or diag $stderr;
    };

    subtest "$mode: a resume admits the account's keys as if new" => sub {
        my $key = $t->{invariants_successor};
        $api->(POST => '/v1/keys', { name => 'another', scopes => ['ip:read'], rateLimitPerMinute => 600 });
        $t->ctl('account', 'suspend', $acc->{id});
        $becomes->($key->{secret}, 403, 'suspended: 403 at the edge');
        $t->ctl('account', 'update', $acc->{id}, '--max-keys', 1);
        $ctl_refused->('KEY_LIMIT_REACHED', 'two active keys, a cap of one', 'account', 'resume', $acc->{id});
        $caught_up->();
        is $edge->($key->{secret}), 403, 'still suspended at the edge';
        $t->ctl('account', 'update', $acc->{id}, '--max-keys', 2);
        $t->ctl('account', 'resume', $acc->{id});
        $becomes->($key->{secret}, 200, 'resumed once within the cap');
    };
}

run_mode('single host');
my $etcd = EtcdCluster->new(members => 1);
run_mode('many edges', etcd => $etcd->endpoints);

done_testing;
