package QuotaHammer;

# Hammers many edges at once with one key until a quota refuses (issue 28,
# t/65 and t/66): on each edge, $clients clients each paced at $rate
# requests a second send GET /t/x with the key until their first 429
# QUOTA_EXCEEDED (or 120 s). Returns { admitted => [per edge], refused =>
# [per edge, clients that ended on QUOTA_EXCEEDED], other => answers that
# were neither 200 nor that, took => seconds }. $o{during}, if given, is
# called once, $o{after} seconds after the start (e.g. to kill a server
# mid-run).
#
#   my $r = QuotaHammer::hammer(\@edges, $secret, clients => 4, rate => 10);

use strict;
use warnings;
use POSIX ();
use Time::HiRes qw(time sleep);
use KeyauthTest;

sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

# One client in a child process; writes "admitted quota_exceeded other".
sub _client {
    my ($e, $out, $secret, $rate) = @_;
    my $pid = fork // die "fork: $!";
    return $pid if $pid;
    my ($ok, $quota, $other) = (0, 0, 0);
    my $start = time;
    my $deadline = $start + 120;
    for (my $i = 0; time < $deadline; $i++) {
        my $wait = $start + $i / $rate - time;
        sleep $wait if $wait > 0;
        my $res = eval { $e->request(GET => '/t/x', "Authorization: Bearer $secret") };
        my $st = $res ? $res->{status} : 0;
        if ($st == 200) { $ok++ }
        elsif ($st == 429 && code_of($res) eq 'QUOTA_EXCEEDED') { $quota++; last }
        else { $other++ }
    }
    open my $fh, '>', $out or die $!;
    print $fh "$ok $quota $other\n";
    close $fh;
    POSIX::_exit(0);  # no END blocks: the temp dirs belong to the parent
}

my $runs = 0;

sub hammer {
    my ($edges, $secret, %o) = @_;
    my $clients = $o{clients} // 4;
    my $rate = $o{rate} // 10;
    my $t0 = time;
    $runs++;
    my @kids;
    for my $e (0 .. $#$edges) {
        for my $c (1 .. $clients) {
            my $out = $edges->[$e]->dir . "/hammer-$$-$runs-$e-$c.out";
            push @kids, [_client($edges->[$e], $out, $secret, $rate), $out, $e];
        }
    }
    if ($o{during}) {
        sleep $o{after} // 1;
        $o{during}->();
    }
    my %r = (admitted => [(0) x @$edges], refused => [(0) x @$edges], other => 0);
    for my $k (@kids) {
        my ($pid, $out, $e) = @$k;
        waitpid $pid, 0;
        open my $fh, '<', $out or die "no result from client $pid";
        my ($ok, $q, $bad) = split ' ', <$fh>;
        $r{admitted}[$e] += $ok;
        $r{refused}[$e] += $q;
        $r{other} += $bad;
    }
    $r{took} = time - $t0;
    $r{total} = 0;
    $r{total} += $_ for @{ $r{admitted} };
    return \%r;
}

1;
