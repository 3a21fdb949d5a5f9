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

my $seconds = 12;
my $out = qx{$wrk -t2 -c16 -d${seconds}s -s $FindBin::Bin/wrk/count_status.lua http://127.0.0.1:${\ $t->port } -- $key->{secret} /v1/ip/1.1.1.1 2>&1};
my ($ok, $limited, $other, $us) = $out =~ /RESULT ok=(\d+) limited=(\d+) other=(\d+) duration_us=(\d+)/
    or BAIL_OUT("wrk gave no result: $out");
diag sprintf 'wrk: %d admitted, %d limited, %d other in %.2f s', $ok, $limited, $other, $us / 1e6;

is $other, 0, 'every response is 200 or 429';
cmp_ok $limited, '>', 0, 'the load exceeded the key\'s rate (the burst was spent)';
my $steady = $ok - 60_000;
my $expected = 1000 * $us / 1e6;
my $error = abs($steady - $expected) / $expected;
cmp_ok $error, '<=', 0.02,
    sprintf 'after the burst, %d admitted in %.2f s: within 2%% of 1000/s (off by %.2f%%)',
            $steady, $us / 1e6, 100 * $error;

done_testing;
