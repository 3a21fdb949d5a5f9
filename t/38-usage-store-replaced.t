# A usage store removed while nginx and keyauthd run (#44 item 11), as
# docs/RELIABILITY.md says to recover a corrupt one ("remove it and nginx
# makes a new one"): the collecting worker notices at its next collection
# that the files it has open are not the ones at the path any more, and
# makes and writes a new store there (a new edge id), without a reload;
# keyauthd notices at its next read and reads the new store, without a
# restart. Before, the worker wrote into the deleted files until a reload
# and keyauthd read them until its restart. The same for a store replaced
# by another one (moved aside, a copy put back).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use File::Path qw(remove_tree);
use KeyauthTest qw(wait_until);

my $t = KeyauthTest->new(workers => 2);
my $acc = $t->account(entitlement => 100000);
my $key = $t->key(account => $acc->{id});
my $id = "$acc->{id} $key->{id}";
$t->start_keyauthd;
$t->start_nginx(http => "keyauth_zone keys:1m;\nkeyauth_usage_interval 1s;", locations => $KeyauthTest::IP_AND_STATUS);
my $usage_dir = $t->db . '.usage';
my $master = $t->pid;

sub calls {
    my $n = shift;
    is(scalar(grep { $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}")->{status} == 200 } 1 .. $n),
       $n, "$n calls let through");
}
sub stored { my $u = $t->usage->{$id}; return $u ? $u->{allowed} : 0 }
sub shown {
    my $res = KeyauthTest::http_request($t->keyauthd_port, GET => "/v1/keys/$key->{id}",
                                        "Authorization: Bearer $acc->{consoleToken}");
    return (KeyauthTest::json_body($res) // {})->{usage}{allowed} // -1;
}
sub edge_id {
    return '' unless -e "$usage_dir/data.mdb";
    my $dump = `mdb_dump -s meta '$usage_dir'`;
    return $dump =~ /^ 656467655f6964\n ([0-9a-f]+)$/m ? $1 : '';
}

calls(3);
ok wait_until(sub { stored() == 3 && shown() == 3 }, 30, 'the 3 calls stored and shown'), 'stored and shown: 3';
my $first_edge = edge_id();
ok $first_edge, "the store's edge id: $first_edge";

subtest 'removed: the worker makes a new store, keyauthd reads it' => sub {
    remove_tree($usage_dir);
    ok !-e $usage_dir, 'the usage store removed (the documented recovery)';
    calls(2);
    ok wait_until(sub { stored() == 2 }, 30, 'a new store at the path holding the 2 new calls'),
       'the collecting worker made a new store and wrote the new calls there, no reload'
        or diag 'at the path: ' . (stored() // 'nothing');
    isnt edge_id(), $first_edge, '... with a new edge id';
    ok wait_until(sub { shown() == 2 }, 30, 'keyauthd to show the new store\'s count'),
       'keyauthd reads the new store, no restart' or diag 'keyauthd shows ' . shown();
};

subtest 'replaced by another store: both follow the files at the path' => sub {
    my $aside = $t->dir . '/usage-copy';
    remove_tree($aside);
    mkdir $aside or die $!;
    # a consistent copy (mdb_copy reads it in one transaction)
    ok wait_until(sub { stored() == 2 }, 30, 'the count settled'), 'the store holds 2';
    system('mdb_copy', $usage_dir, $aside) == 0 or die 'mdb_copy failed';
    chmod 0640, "$aside/data.mdb";
    chmod 02750, $aside;
    my $second_edge = edge_id();
    remove_tree($usage_dir);
    rename $aside, $usage_dir or die $!;
    calls(4);
    ok wait_until(sub { stored() == 6 }, 30, 'the copy at the path to get the 4 new calls'),
       'the worker writes the store now at the path' or diag 'at the path: ' . stored();
    is edge_id(), $second_edge, '... the copy\'s edge id';
    ok wait_until(sub { shown() == 6 }, 30, 'keyauthd to show 6'), 'keyauthd reads it: 6' or diag shown();
};

is $t->pid, $master, 'the same nginx master throughout (no reload, no restart)';
like $t->request(GET => '/status')->{body}, qr/^keyauth_usage_dropped_total 0$/m, 'nothing dropped';
unlike $t->error_log, qr/\[(?:alert|emerg)\]/, 'no alert in the error log';

done_testing;
