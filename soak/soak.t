# make soak: SOAK_SECONDS (600) of load on the edge while keys are created,
# used and revoked through keyauthd. Checks: no failed request, revocations
# effective on the next request, rate-limit accuracy within 2%, and no growth
# of memory or file descriptors in the nginx workers or keyauthd. Loopback
# only; it stops by itself.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/lib";
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use KeyauthTest;

my $seconds = $ENV{SOAK_SECONDS} // 600;
my ($wrk) = grep { -x } map { "$_/wrk" } split /:/, $ENV{PATH};
BAIL_OUT('wrk is not installed: run make deps') unless $wrk;

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 10_000_000);
my $limited = $t->key(account => $acc->{id}, rate => 60_000);   # 1000/s
$t->start_keyauthd;
$t->start_nginx(http => 'keyauth_zone keys:8m;' . "\n" . $t->console_http(unlimited => 1),
                locations => $t->console_locations . <<'LOC');
        access_log off;
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; ip_lookup; }
LOC

# Private anonymous memory (heap, stacks) is where a leak shows. VmRSS also
# counts the pages of data.mdb mapped so far, which grow with the store
# (hundreds of thousands of keys are made here): reported, not judged.
sub memory_kb {
    my $pid = shift;
    my %kb;
    open my $fh, '<', "/proc/$pid/status" or return (0, 0);
    while (my $line = <$fh>) { $kb{$1} = $2 if $line =~ /^(RssAnon|RssFile):\s+(\d+)/ }
    return ($kb{RssAnon} // 0, $kb{RssFile} // 0);
}
sub fds { my $pid = shift; my @f = glob "/proc/$pid/fd/*"; scalar @f }
sub sample {
    my @pids = ($t->worker_pids, $t->{keyauthd_pid});
    return { map { $_ => [memory_kb($_), fds($_)] } @pids };
}

my $quiet_before = sample();

# 1. load: the rate-limited key as fast as wrk can go, for the whole soak
my $out = $t->dir . '/wrk.out';
my $load = fork // die;
if ($load == 0) {
    exec "$wrk -t1 -c16 -d${seconds}s -s $FindBin::Bin/../t/wrk/count_status.lua "
       . "http://127.0.0.1:${\ $t->port } -- $limited->{secret} /v1/ip/8.8.8.8 > $out 2>&1";
}

# 2. churn: create a key through the console API, use it, revoke it, use it again
my $churn_out = $t->dir . '/churn.out';
my $churn = fork // die;
if ($churn == 0) {
    my ($rounds, $bad, $why) = (0, 0, '');
    my $deadline = time + $seconds - 2;
    my $body = '{"name":"soak","scopes":["ip:read"],"rateLimitPerMinute":100}';
    while (time < $deadline) {
        my $ok = eval {
            my $made = $t->request(POST => '/v1/keys', "Authorization: Bearer $acc->{consoleToken}",
                                   'Content-Type: application/json', \$body);
            my $k = KeyauthTest::json_body($made) or die "create: $made->{status}\n";
            my $use = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k->{secret}")->{status};
            my $rev = $t->request(POST => "/v1/keys/$k->{id}/revoke",
                                  "Authorization: Bearer $acc->{consoleToken}")->{status};
            my $after = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $k->{secret}")->{status};
            die "statuses $made->{status} $use $rev $after\n"
                unless $made->{status} == 201 && $use == 200 && $rev == 200 && $after == 401;
            1;
        };
        unless ($ok) { $bad++; $why = $@; chomp $why }
        $rounds++;
    }
    open my $fh, '>', $churn_out or die;
    print $fh "$rounds $bad $why\n";
    close $fh;
    POSIX::_exit(0);
}

# 3. samples: after a warm-up, then at the end
sleep(($seconds < 60 ? $seconds / 4 : 30));
my $first = sample();
sleep 1 while kill 0, $churn and waitpid($churn, POSIX::WNOHANG()) == 0;
my $last = sample();
diag "samples: " . join(", ", map { "$_=@{$first->{$_}}" } sort keys %$first) . " / " . join(", ", map { "$_=@{$last->{$_}}" } sort keys %$last);
waitpid $load, 0;
# finished connections close in their own time: wait (a while) for the counts
# the checks below accept, then take the sample they judge
KeyauthTest::wait_until(sub {
    my $now = sample();
    !grep { $quiet_before->{$_} && $now->{$_} && $now->{$_}[2] - $quiet_before->{$_}[2] > 8 } keys %$now;
}, 30, 'the fds of the idle workers and keyauthd to settle');
my $quiet_after = sample();

open my $fh, '<', $churn_out or die "no churn result";
my ($rounds, $bad, $why) = split ' ', <$fh>, 3;
cmp_ok $rounds, '>', 10, "$rounds create-use-revoke rounds";
is $bad, 0, 'every round: 201, 200, revoke 200, then 401 on the very next request'
    or diag "last failure: $why";

my $w = do { local (@ARGV, $/) = ($out); <> } // '';
my ($ok, $limited_n, $other, $us) = $w =~ /RESULT ok=(\d+) limited=(\d+) other=(\d+) duration_us=(\d+)/
    or BAIL_OUT("wrk gave no result: $w");
is $other, 0, "load: $ok admitted, $limited_n limited, no other status";
my $expected = 60_000 + 1000 * $us / 1e6;
my $err = abs($ok - $expected) / (1000 * $us / 1e6);
cmp_ok $err, '<=', 0.02, sprintf('rate accuracy over %.0f s: off by %.2f%%', $us / 1e6, 100 * $err);

diag sprintf 'data.mdb: %.1f MB', (-s $t->db . '/data.mdb') / 1e6;
for my $pid (sort keys %$first) {
    next unless $last->{$pid} && $quiet_before->{$pid} && $quiet_after->{$pid};
    my $what = $pid == $t->{keyauthd_pid} ? 'keyauthd' : "worker $pid";
    my ($a0, $m0) = @{ $first->{$pid} }[0, 1];
    my ($a1, $m1) = @{ $last->{$pid} }[0, 1];
    cmp_ok $a1 - $a0, '<', 8 * 1024,
        "$what: anonymous RSS $a0 kB (warm) -> $a1 kB (end); file-backed (store, binaries) $m0 -> $m1 kB";
    # idle before and after: only the upstream keep-alive cache may remain
    my ($f0, $f1) = ($quiet_before->{$pid}[2], $quiet_after->{$pid}[2]);
    cmp_ok $f1 - $f0, '<=', 8, "$what: fds $f0 (idle, before) -> $f1 (idle, after)";
}

done_testing;
