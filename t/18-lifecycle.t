# The key lifecycle at the edge, through nginx -> keyauthd -> the store ->
# the edge, in both modes: single host (keyauthd writes the LMDB the workers
# read: every change holds on the very next request) and many edges
# (keyauthd on etcd, keyauth-syncd mirroring into the edge's LMDB: every
# change holds within the propagation bound, waited for with a deadline).
# Expiry from its exact millisecond, PATCH applied at once, a roll that
# keeps the predecessor's rate-limit state, suspension, the audit trail with
# the client address nginx saw (X-Real-IP believed from --trusted-proxy
# only), and keyauthd SIGKILLed during rolls.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use JSON::PP;
use EtcdCluster;
use KeyauthTest qw(wait_until rfc3339);

my $json = JSON::PP->new->utf8->canonical;
my $LOCATIONS = <<'LOC';
        keyauth on;
        location /v1/ip/ { keyauth_scope ip:read; proxy_pass http://tool; }
LOC

sub run_mode {
    my ($mode, %opt) = @_;
    my $t = KeyauthTest->new(%opt);
    my $acc = $t->account(name => "lifecycle-$mode", entitlement => 10_000_000);
    $t->start_console_stack(locations => $LOCATIONS);
    my $tok = $acc->{consoleToken};

    my $api = $t->console_client($tok);
    my $edge = sub {
        my $secret = shift;
        my $res = $t->request(GET => '/v1/ip/192.0.2.1', "Authorization: Bearer $secret");
        $res->{json} = KeyauthTest::json_body($res);
        return $res;
    };
    # Single host: the change holds on the next request. Many edges: within
    # the propagation bound (syncd applies a watch event in milliseconds).
    my $soon = sub {
        my ($secret, $status, $what) = @_;
        return is $edge->($secret)->{status}, $status, $what unless $opt{etcd};
        ok wait_until(sub { $edge->($secret)->{status} == $status }, 10, $what), $what;
    };
    my $create = sub {
        my (%f) = @_;
        my $res = $api->(POST => '/v1/keys', { name => 'k', scopes => ['ip:read'], rateLimitPerMinute => 600, %f });
        is $res->{status}, 201, 'key created' or diag $res->{body};
        $soon->($res->{json}{secret}, 200, 'the new key works at the edge') unless $f{expiresAt};
        return $res->{json};
    };
    my @secrets = ($tok);

    subtest "$mode: expiry refuses the key from its exact millisecond" => sub {
        # far enough ahead for a syncd-fed edge to learn the key on a busy machine
        my $expires = time + 6;
        my $k = $create->(expiresAt => rfc3339($expires), rateLimitPerMinute => 10_000_000);
        push @secrets, $k->{secret};
        is $k->{expiresAt}, rfc3339($expires), 'expiresAt as given, in UTC with milliseconds';
        $expires = int($expires * 1000 + 0.5) / 1000;
        ok wait_until(sub { $edge->($k->{secret})->{status} == 200 }, 10, 'the key to work'), 'works before';
        my ($before, $after, @wrong) = (0, 0);
        while (time < $expires + 1) {
            my $sent = time;
            my $res = $edge->($k->{secret});
            my $got = time;
            if ($got < $expires) {
                $before++;
                push @wrong, "$res->{status} before expiry" if $res->{status} != 200;
            } elsif ($sent >= $expires) {
                $after++;
                push @wrong, "$res->{status} after expiry"
                    if $res->{status} != 401 || $res->{json}{error}{code} ne 'INVALID_API_KEY';
            }
            sleep 0.002;
        }
        is join(', ', @wrong[0 .. ($#wrong < 4 ? $#wrong : 4)]), '', "$before requests before expiry got 200, $after after it got 401 INVALID_API_KEY";
        ok $before > 0 && $after > 0, 'both sides of the moment were tried';
        is $api->(GET => "/v1/keys/$k->{id}")->{json}{status}, 'expired', 'the console says expired';
    };

    subtest "$mode: PATCH applies at the edge, with the same secret" => sub {
        my $k = $create->(name => 'patched');
        push @secrets, $k->{secret};
        my $res = $api->(PATCH => "/v1/keys/$k->{id}", { scopes => ['geo:read'], name => 'renamed' });
        is $res->{status}, 200, 'patched';
        is_deeply $res->{json}{scopes}, ['geo:read'], 'new scopes';
        $soon->($k->{secret}, 403, 'the edge refuses the scope it lost');
        is $edge->($k->{secret})->{json}{error}{code}, 'INSUFFICIENT_SCOPE', 'INSUFFICIENT_SCOPE';
        $api->(PATCH => "/v1/keys/$k->{id}", { scopes => ['ip:read'], expiresAt => rfc3339(time + 3600) });
        $soon->($k->{secret}, 200, 'and admits it again once given back');
        $api->(PATCH => "/v1/keys/$k->{id}", { expiresAt => rfc3339(time + 0.3) });
        ok wait_until(sub { $edge->($k->{secret})->{status} == 401 }, 10, 'expiry moved closer'),
            'an expiry moved into the next second takes effect';
        $res = $api->(PATCH => "/v1/keys/$k->{id}", { expiresAt => undef });
        is $res->{json}{expiresAt}, undef, 'expiresAt: null clears it';
        $soon->($k->{secret}, 200, 'and the key works again');
    };

    subtest "$mode: a rolled key keeps its predecessor's rate-limit state" => sub {
        # 2 a minute: a token comes back every 30 s, far longer than the test
        my $k = $create->(name => 'limited', rateLimitPerMinute => 2);
        push @secrets, $k->{secret};
        my @codes = map { $edge->($k->{secret})->{status} } 1 .. 3;
        # the create's own check spent one
        is "@codes", '200 429 429', 'driven to its limit';
        my $res = $api->(POST => "/v1/keys/$k->{id}/roll", { gracePeriodSeconds => 600 });
        is $res->{status}, 201, 'rolled';
        my $next = $res->{json};
        push @secrets, $next->{secret};
        is $next->{rolledFrom}, $k->{id}, 'rolledFrom';
        is $api->(GET => "/v1/keys/$k->{id}")->{json}{rolledTo}, $next->{id}, 'rolledTo';
        $soon->($next->{secret}, 429, 'the successor is known at the edge and still limited');
        my $limited = $edge->($next->{secret});
        is $limited->{json}{error}{code}, 'RATE_LIMITED', 'RATE_LIMITED, not a fresh limit';
        is $edge->($k->{secret})->{status}, 429, 'the predecessor, in its grace, shares the limit';
        $res = $api->(POST => "/v1/keys/$next->{id}/roll");
        is $res->{status}, 201, 'rolled again with no grace';
        push @secrets, $res->{json}{secret};
        $soon->($next->{secret}, 401, 'a key rolled with no grace stops at once');
        is $edge->($res->{json}{secret})->{status}, 429, 'the third key still spends the first key\'s state';
    };

    subtest "$mode: suspension is 403 ACCOUNT_SUSPENDED on the console and at the edge" => sub {
        my $k = $create->(name => 'suspended');
        push @secrets, $k->{secret};
        $t->ctl('account', 'suspend', $acc->{id});
        $soon->($k->{secret}, 403, 'the edge refuses the key');
        is $edge->($k->{secret})->{json}{error}{code}, 'ACCOUNT_SUSPENDED', 'ACCOUNT_SUSPENDED at the edge';
        my $res = $api->(GET => '/v1/keys');
        is $res->{status}, 403, 'the console refuses the account';
        is $res->{json}{error}{code}, 'ACCOUNT_SUSPENDED', 'ACCOUNT_SUSPENDED on the console';
        $t->ctl('account', 'resume', $acc->{id});
        $soon->($k->{secret}, 200, 'resumed: the key works again');
        is $api->(GET => '/v1/keys')->{status}, 200, 'and the console answers';
    };

    subtest "$mode: keyauthd killed during rolls loses nothing" => sub {
        my @ids = map { $create->(name => "chain$_")->{id} } 1 .. 3;
        for my $round (1 .. 3) {
            my $pid = fork // die;
            if ($pid == 0) {
                for my $id (@ids) {
                    my $cur = $id;
                    for (1 .. 200) {
                        my $r = $api->(POST => "/v1/keys/$cur/roll", { gracePeriodSeconds => 1 });
                        last unless $r->{status} == 201;
                        $cur = $r->{json}{id};
                    }
                }
                POSIX::_exit(0);
            }
            sleep 0.2 + rand(0.5);
            $t->stop_keyauthd('KILL');
            kill 'KILL', $pid;
            waitpid $pid, 0;
            $t->start_keyauthd;
        }
        # every chain is whole: each rolledTo names a key whose rolledFrom
        # names it back, and each key's record reads
        my (%by_id, $cursor);
        for (1 .. 1000) {
            my $res = $api->(GET => '/v1/keys?limit=100' . ($cursor ? "&cursor=$cursor" : ''));
            is $res->{status}, 200, 'list works' or last;
            $by_id{$_->{id}} = $_ for @{ $res->{json}{keys} };
            $cursor = $res->{json}{nextCursor} or last;
        }
        my $broken = 0;
        for my $k (values %by_id) {
            next unless $k->{rolledTo};
            my $n = $by_id{ $k->{rolledTo} };
            $broken++ unless $n && $n->{rolledFrom} eq $k->{id};
        }
        is $broken, 0, scalar(keys %by_id) . ' keys listed, every roll link holds both ways';
    };

    subtest "$mode: the audit trail names the console caller and nginx's client address" => sub {
        # every page, newest first
        my (@events, $all, $cursor);
        for (1 .. 1000) {
            my $res = $api->(GET => '/v1/audit?limit=100' . ($cursor ? "&cursor=$cursor" : ''));
            is $res->{status}, 200, 'audit answers' or last;
            push @events, @{ $res->{json}{events} };
            $all .= $res->{body};
            $cursor = $res->{json}{nextCursor} or last;
        }
        my %actions;
        $actions{ $_->{action} }++ for @events;
        ok $actions{$_}, "has $_" for qw(account.create key.create key.update key.roll account.suspend account.resume);
        my ($update) = grep { $_->{action} eq 'key.update' } @events;
        is $update->{actor}{type}, 'console', 'a console actor';
        is $update->{actor}{account}, $acc->{id}, 'the account';
        is $update->{address}, '127.0.0.1', 'the client address nginx saw (X-Real-IP)';
        my ($suspend) = grep { $_->{action} eq 'account.suspend' } @events;
        is $suspend->{actor}{type}, 'operator', 'the operator suspended it';
        my @ids = map { $_->{id} } @events;
        is_deeply \@ids, [ sort { $b cmp $a } @ids ], scalar(@ids) . ' events, newest first';
        my @found = grep { index($all, $_) >= 0 } @secrets;
        is scalar(@found), 0, 'no secret or console token made in this test is in any event (' .
            scalar(@secrets) . ' searched)';
    };

    # The address the audit trail records for a rename of key $id sent from
    # the loopback address $from to $port (nginx's or keyauthd's own) with
    # the extra headers
    my $renamed = 0;
    my $address_of_rename = sub {
        my ($id, $from, $port, @headers) = @_;
        my $name = 'renamed ' . ++$renamed;
        my $body = $json->encode({ name => $name });
        my $res = KeyauthTest::http_request_from($from, $port, PATCH => "/v1/keys/$id", "Authorization: Bearer $tok",
                                                 'Content-Type: application/json', @headers, \$body);
        is $res->{status}, 200, "PATCH from $from" or diag $res->{body};
        # the trail is read until it answers 200 (on a busy machine keyauthd
        # may answer 503 SERVER_BUSY, or nginx time out), never taken as empty
        my ($events, $last);
        KeyauthTest::wait_until(sub {
            $last = $api->(GET => '/v1/audit?limit=20');
            $events = $last->{json}{events} if $last->{status} == 200;
            defined $events;
        }, 30, 'the audit trail to answer') or return "no answer ($last->{status} $last->{body})";
        my ($ev) = grep { $_->{action} eq 'key.update' && ($_->{changes}{name}{to} // '') eq $name } @$events;
        return $ev ? $ev->{address} : 'no event';
    };

    subtest "$mode: X-Real-IP is believed from the trusted proxy only" => sub {
        my $k = $create->();
        push @secrets, $k->{secret};
        my $forged = 'X-Real-IP: 203.0.113.9';
        is $address_of_rename->($k->{id}, '127.0.0.2', $t->port, $forged), '127.0.0.2',
           'through nginx (--trusted-proxy 127.0.0.1): the client nginx saw, not what the client wrote';
        is $address_of_rename->($k->{id}, '127.0.0.3', $t->keyauthd_port, $forged), '127.0.0.3',
           'straight to keyauthd from another local address: that address, the header ignored';
        $t->stop_keyauthd;
        $t->start_keyauthd(trusted_proxy => '');
        is $address_of_rename->($k->{id}, '127.0.0.1', $t->keyauthd_port, $forged), '127.0.0.1',
           'no --trusted-proxy: a forged X-Real-IP from 127.0.0.1 itself is ignored';
        is $address_of_rename->($k->{id}, '127.0.0.2', $t->port), '127.0.0.1',
           '... and through nginx the peer is recorded: nginx\'s address';
        $t->stop_keyauthd;
        $t->start_keyauthd;
    };
}

run_mode('single host');
my $etcd = EtcdCluster->new(members => 1);
run_mode('many edges', etcd => $etcd->endpoints);

done_testing;
