# The edge fails closed: no store, a store from the future, or a record it
# cannot read never lets a request through; the error log says why.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use KeyauthTest qw(wait_until);

sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

# Patches every copy of $find in data.mdb (LMDB copies pages on write, so an
# old copy may linger) with $replace at offset $at from the match.
sub patch_data_file {
    my ($db, $find, $at, $replace, $guard) = @_;
    open my $fh, '+<:raw', "$db/data.mdb" or die $!;
    local $/;
    my $data = <$fh>;
    my $n = 0;
    my $pos = 0;
    while ((my $i = index($data, $find, $pos)) >= 0) {
        $pos = $i + 1;
        next if $guard && !$guard->($data, $i);
        substr($data, $i + $at, length $replace) = $replace;
        $n++;
    }
    seek $fh, 0, 0;
    print $fh $data;
    close $fh;
    return $n;
}

my $locations = <<'LOC';
        location /v1/ip/ { keyauth on; keyauth_scope ip:read; proxy_pass http://tool; }
LOC

subtest 'no store at start: 503, then it appears and requests pass' => sub {
    my $t = KeyauthTest->new;
    $t->start_nginx(no_init => 1, locations => $locations);
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', 'Authorization: Bearer ka_' . ('A' x 38));
    # a malformed key is refused before the store is needed
    is $res->{status}, 401, 'a malformed key is still 401 without a store';

    my $acc = $t->account;
    my $key = $t->key(account => $acc->{id});
    # workers retry opening at most once a second: 503 AUTH_UNAVAILABLE until then
    my $status = 0;
    wait_until(sub {
        $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
        $status = $res->{status};
        $status != 503 || code_of($res) ne 'AUTH_UNAVAILABLE';
    }, 30, 'the store to be opened');
    is $status, 200, 'once the store exists, the same key passes';
    like $t->error_log, qr/keyauth: cannot open key store "\Q${\ $t->db }\E": .*No such file/,
        'the error log names the store and the reason';
};

subtest 'store missing for good: 503 AUTH_UNAVAILABLE, never a pass-through' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    my $key = $t->key(account => $acc->{id});
    $t->start_nginx(locations => $locations, db => $t->dir . '/nowhere');
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
    is $res->{status}, 503, 'status is 503';
    is code_of($res), 'AUTH_UNAVAILABLE', 'AUTH_UNAVAILABLE';
    unlike $res->{body}, qr/upstream/, 'the upstream is never reached';
    ok !defined KeyauthTest::header($res, 'WWW-Authenticate'), 'no Bearer challenge on 503';
};

subtest 'schema version from the future: fail closed' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    my $key = $t->key(account => $acc->{id});
    my $n = patch_data_file($t->db, 'schema_version', length('schema_version'), "\x09\x00\x00\x00",
                            sub { substr($_[0], $_[1] + 14, 4) eq "\x03\x00\x00\x00" });
    ok $n >= 1, "schema version patched to 9 ($n copies)";
    $t->start_nginx(no_init => 1, locations => $locations);
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
    is $res->{status}, 503, 'status is 503';
    is code_of($res), 'AUTH_UNAVAILABLE', 'AUTH_UNAVAILABLE';
    like $t->error_log, qr/schema version 9 is not supported/, 'error log says why';
    my ($rc, undef, $err) = $t->ctl_raw('key', 'list', '--account', $acc->{id});
    is $rc, 1, 'keyauthctl refuses to touch it too';
    like $err, qr/schema version 9/, '... and says why';
};

subtest 'key record of an unknown layout version: that key is invalid' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    # two scopes do not fit a key_slots slot: the edge reads the record
    my $key = $t->key(account => $acc->{id}, scopes => ['ip:read', 'geo:read']);
    my $good = $t->key(account => $acc->{id});
    (my $hex = $key->{id}) =~ s/^key_//;
    my $id = pack 'H*', $hex;
    # the record head: u16 version (2), u8 status (1), ... key id at offset 8
    my $n = patch_data_file($t->db, $id, -8, "\x07\x00",
                            sub { $_[1] >= 8 && substr($_[0], $_[1] - 8, 3) eq "\x02\x00\x01" });
    ok $n >= 1, "record version patched ($n copies)";
    $t->start_nginx(no_init => 1, locations => $locations);
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
    is $res->{status}, 401, 'status is 401';
    is code_of($res), 'INVALID_API_KEY', 'INVALID_API_KEY';
    like $t->error_log, qr/\[error\].*keyauth: key record of "\Q$key->{prefix}\E\.\.\." has unknown layout version 7/,
        'logged at error level with the version';
    is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $good->{secret}")->{status}, 200,
        'other keys are unaffected';
};

subtest 'a corrupt key slot: that key is invalid' => sub {
    my $t = KeyauthTest->new;
    my $acc = $t->account;
    my $key = $t->key(account => $acc->{id});
    my $good = $t->key(account => $acc->{id});
    (my $hex = $key->{id}) =~ s/^key_//;
    my $id = pack 'H*', $hex;
    # the slot: u8 state (1, inline), u8 status (1), ... key id at offset 24
    my $n = patch_data_file($t->db, $id, -23, "\x07",
                            sub { $_[1] >= 24 && substr($_[0], $_[1] - 24, 2) eq "\x01\x01" });
    ok $n >= 1, "slot status patched ($n copies)";
    $t->start_nginx(no_init => 1, locations => $locations);
    my $res = $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $key->{secret}");
    is $res->{status}, 401, 'status is 401';
    is code_of($res), 'INVALID_API_KEY', 'INVALID_API_KEY';
    like $t->error_log, qr/\[error\].*keyauth: key slot of "\Q$key->{prefix}\E\.\.\." is corrupt/,
        'logged at error level';
    unlike $t->error_log, qr/\Q$key->{secret}\E/, 'the secret is not logged';
    is $t->request(GET => '/v1/ip/1.1.1.1', "Authorization: Bearer $good->{secret}")->{status}, 200,
        'other keys are unaffected';
    my ($rc, $out) = $t->ctl_raw('doctor');
    isnt $rc, 0, 'keyauthctl doctor fails';
    my $said = join "\n", map { $_->{message} } @{ ($out // {})->{findings} // [] };
    like $said, qr/key_slots: slot \d+ differs from its key's record/,
        '... naming the slot';
};

done_testing;
