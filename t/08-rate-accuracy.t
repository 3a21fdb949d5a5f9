# A high-rate key under load: after its burst, admissions track the key's
# rate within 2% (nginx's own limit_req, on a cached millisecond clock,
# under-admits at such rates; keyauth uses a nanosecond monotonic clock).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest;

my ($wrk) = grep { -x } map { "$_/wrk" } split /:/, $ENV{PATH};
BAIL_OUT('wrk is not installed: run make deps') unless $wrk;

my $t = KeyauthTest->new;
my $acc = $t->account(entitlement => 1_000_000);
my $key = $t->key(account => $acc->{id}, rate => 60_000);   # 1000/s, burst 60,000
my $file = $t->dir . '/ok.txt';
open my $fh, '>', $file or die $!;
print $fh "ok\n";
close $fh;

$t->start_nginx(http => 'keyauth_zone keys:1m;', locations => <<"LOC");
        access_log off;
        location = /v1/ip/1.1.1.1 {
            keyauth on;
            keyauth_scope ip:read;
            default_type text/plain;
            alias $file;
        }
LOC

# Spending the burst takes as long as this machine needs (longer under ASan
# beside other suites); the rate is measured over a window after it.
my $window = 8;
my $out = qx{$wrk -t2 -c16 -d120s -s $FindBin::Bin/wrk/steady_rate.lua http://127.0.0.1:${\ $t->port } -- $key->{secret} /v1/ip/1.1.1.1 $window 2>&1};
unlike $out, qr/RESULT burst_unspent/, 'the load exceeded the key\'s rate (the burst was spent)'
    or diag $out;
my ($ok, $other, $us) = $out =~ /RESULT admitted=(\d+) other=(\d+) window_us=(\d+)/
    or BAIL_OUT("wrk gave no result: $out");
diag sprintf 'wrk: %d admitted in a %.2f s window after the burst, %d other', $ok, $us / 1e6, $other;

is $other, 0, 'every response is 200 or 429';
cmp_ok $us, '>=', 0.9e6 * $window, 'the window after the burst was measured whole';
my $expected = 1000 * $us / 1e6;
my $error = abs($ok - $expected) / $expected;
cmp_ok $error, '<=', 0.02,
    sprintf 'after the burst, %d admitted in %.2f s: within 2%% of 1000/s (off by %.2f%%)',
            $ok, $us / 1e6, 100 * $error;

done_testing;
