# The README walkthrough, run as written against `make run` (on free ports and
# a throwaway var/), so the README cannot silently rot.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Temp qw(tempdir);
use IO::Socket::INET;
use POSIX ();
use KeyauthTest;

my $root = KeyauthTest::root();
open my $fh, '<', "$root/README.md" or die $!;
my $readme = do { local $/; <$fh> };
close $fh;
my ($block) = $readme =~ /<!-- walkthrough:[^\n]*-->\n```sh\n(.*?)```/s
    or BAIL_OUT('no walkthrough block in README.md');

my $dir = tempdir('keyauth-walk-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{KEYAUTH_KEEP});
my $port = KeyauthTest::free_port();
my $kport = KeyauthTest::free_port();
my $aport = KeyauthTest::free_port();

# make run, exactly, with its documented environment overrides.
my $pid = fork // die;
if ($pid == 0) {
    POSIX::setsid();
    open STDOUT, '>', "$dir/make-run.log" or die;
    open STDERR, '>&', \*STDOUT or die;
    chdir $root or die;
    $ENV{KEYAUTH_PORT} = $port;
    $ENV{KEYAUTHD_PORT} = $kport;
    $ENV{KEYAUTHD_ADMIN_PORT} = $aport;
    $ENV{KEYAUTH_VAR} = "$dir/var";
    exec 'make', '--no-print-directory', 'run' or die "exec make: $!";
}
END {
    local $?;  # waitpid must not become this test's exit status
    if ($pid) { kill 'TERM', -$pid; waitpid $pid, 0 }
}

my $up = 0;
for (1 .. 600) {
    my $log = -e "$dir/make-run.log" ? do { local (@ARGV, $/) = ("$dir/make-run.log"); <> } // '' : '';
    if ($log =~ /Ctrl-C stops both/ && IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port")) { $up = 1; last }
    select undef, undef, undef, 0.1;
}
ok $up, 'make run came up and printed what to try' or BAIL_OUT(do { local (@ARGV, $/) = ("$dir/make-run.log"); <> } // '');
like do { local (@ARGV, $/) = ("$dir/make-run.log"); <> }, qr/export TOKEN=/, 'with the token to export';

# One command per line (the block has no continuations); each is run in the
# same shell, after a marker, so its output can be told apart.
my @commands = grep { /\S/ && !/^\s*#/ } split /\n/, $block;
my $script = "set -e\ncd '$dir'\n";
my @expect;
for my $i (0 .. $#commands) {
    my $cmd = $commands[$i];
    $cmd =~ s{127\.0\.0\.1:8080}{127.0.0.1:$port}g;
    $cmd =~ s{127\.0\.0\.1:8082}{127.0.0.1:$aport}g;
    $cmd =~ s{\bvar/}{$dir/var/}g;
    push @expect, $cmd =~ /#=>\s*([\d ]+?)\s*$/ ? $1 : undef;
    $script .= "echo '\@\@STEP $i\@\@'\n$cmd\n";
}
open my $sh, '>', "$dir/walk.sh" or die;
print $sh $script;
close $sh;
my $out = qx{bash '$dir/walk.sh' 2>&1};
is $? >> 8, 0, 'every walkthrough command ran' or diag $out;

my %output;
my @parts = split /\@\@STEP (\d+)\@\@\n/, $out;
shift @parts;
while (my ($i, $text) = splice @parts, 0, 2) { $output{$i} = $text // '' }

for my $i (0 .. $#commands) {
    next unless defined $expect[$i];
    my ($last) = ($output{$i} // '') =~ /([^\n]*)\n?\z/;
    (my $codes = $last // '') =~ s/^.*?((?:\d{3}\s*)+)$/$1/;
    $codes =~ s/\s+$//;
    my ($label) = $commands[$i] =~ m{(https?://\S+|for i)};
    is $codes, $expect[$i], "step " . ($i + 1) . " ($label): $expect[$i]";
}
like $output{ (grep { $commands[$_] =~ /grep -i/ } 0 .. $#commands)[0] } // '', qr/retry-after: \d+/i,
    'the 429 carries Retry-After';

done_testing;
