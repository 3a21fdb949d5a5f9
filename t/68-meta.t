# meta on keys and accounts and who-is-calling for the upstream (issue 48,
# DESIGN *Restrictions and metadata*), in both modes: meta is stored and
# handed on, never interpreted; $keyauth_plan_id, $keyauth_key_name,
# $keyauth_key_meta and $keyauth_account_meta reach the upstream through
# proxy_set_header, and the verify API answers the same; a change is seen by
# the next request; a meta over 1 KiB, not an object, or not UTF-8 is a 400
# naming the field, with nothing changed.
use strict;
use warnings;
use utf8;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Encode qw(encode_utf8);
use EtcdCluster;
use KeyauthTest qw(wait_until);

my $root = KeyauthTest::root();
my $LOCATIONS = <<'LOC';
        location /v1/who/ {
            keyauth on;
            keyauth_scope ip:read;
            proxy_set_header X-Plan-Id $keyauth_plan_id;
            proxy_set_header X-Key-Name $keyauth_key_name;
            proxy_set_header X-Key-Meta $keyauth_key_meta;
            proxy_set_header X-Account-Meta $keyauth_account_meta;
            proxy_pass http://tool/who/;
        }
        location = /v1/verify { allow 127.0.0.1; deny all; keyauth_verify; }
LOC

sub run_mode {
    my ($mode, %opt) = @_;
    my $t = KeyauthTest->new(%opt);
    $t->ctl('init') unless $opt{etcd};
    $t->ctl('plans', 'import', "$root/lmdb_schema/plans.json");
    my $acc = $t->ctl('account', 'create', '--name', "meta-$mode", '--plan', 'basic-1k', '--entitlement', 600,
                      '--meta', '{"tier":"gold","crm":"C-17"}');
    is_deeply $acc->{meta}, { crm => 'C-17', tier => 'gold' }, "$mode: keyauthctl --meta on the account";
    my $ops = $t->ctl('admin-token', 'create', '--name', 'ops', '--scope', '*');
    $t->start_console_stack(locations => $LOCATIONS, admin => 1);
    my $api = $t->console_client($acc->{consoleToken});
    # what the upstream was told, as text (bytes decoded as UTF-8)
    my $who = sub {
        my $res = $t->request(GET => '/v1/who/x', "Authorization: Bearer $_[0]");
        return {} unless $res->{status} == 200;
        my %seen = map { /^(\w+)=(.*)$/ ? ($1 => Encode::decode_utf8($2)) : () } split /\n/, $res->{body};
        return \%seen;
    };

    my $res = $api->(POST => '/v1/keys', { name => 'billing "svc"', scopes => ['ip:read'], rateLimitPerMinute => 600,
                                           meta => { 'région' => 'Zürich', env => 'prod' } });
    is $res->{status}, 201, "$mode: a key with meta" or diag $res->{body};
    is_deeply $res->{json}{meta}, { env => 'prod', 'région' => 'Zürich' }, '... in the key object';
    my ($secret, $id) = @{ $res->{json} }{qw(secret id)};
    ok wait_until(sub { ($who->($secret)->{plan} // '') eq 'basic-1k' }, 10, 'the key at the edge'),
        '$keyauth_plan_id: the account\'s plan';
    my $seen = $who->($secret);
    is $seen->{name}, 'billing "svc"', '$keyauth_key_name';
    is $seen->{keymeta}, '{"env":"prod","région":"Zürich"}', '$keyauth_key_meta: compact JSON, members in name order';
    is $seen->{accountmeta}, '{"crm":"C-17","tier":"gold"}', '$keyauth_account_meta';

    my $plain = $api->(POST => '/v1/keys', { name => 'plain', scopes => ['ip:read'], rateLimitPerMinute => 600 })->{json};
    is $plain->{meta}, undef, 'a key without meta: null';
    ok wait_until(sub { ($who->($plain->{secret})->{name} // '') eq 'plain' }, 10, 'plain at the edge'),
        'its name reaches the upstream';
    is $who->($plain->{secret})->{keymeta}, '', '... and no X-Key-Meta (the variable is not found)';

    my $codec = JSON::PP->new->utf8->canonical;
    my $verify = $codec->decode($t->request(POST => '/v1/verify', 'Content-Type: application/json',
                                            \$codec->encode({ key => $secret }))->{body});
    is_deeply [@{$verify}{qw(planId name meta accountMeta)}],
        ['basic-1k', 'billing "svc"', { env => 'prod', 'région' => 'Zürich' }, { crm => 'C-17', tier => 'gold' }],
        'verify answers planId, name, meta and accountMeta' or diag explain $verify;
    $verify = $codec->decode($t->request(POST => '/v1/verify', 'Content-Type: application/json',
                                         \$codec->encode({ key => $plain->{secret} }))->{body});
    is $verify->{meta}, undef, '... meta null for a key without';

    # changed: the next request follows
    $res = $api->(PATCH => "/v1/keys/$id", { meta => { env => 'staging' } });
    is $res->{status}, 200, 'PATCH meta' or diag $res->{body};
    ok wait_until(sub { ($who->($secret)->{keymeta} // '') eq '{"env":"staging"}' }, 10, 'new meta'),
        '... the next request hands on the new meta';
    $t->ctl('account', 'update', $acc->{id}, '--meta', 'none');
    ok wait_until(sub { ($who->($secret)->{accountmeta} // 'x') eq '' }, 10, 'account meta gone'),
        'keyauthctl account update --meta none: no X-Account-Meta';
    $t->ctl('key', 'update', $id, '--meta', '{"env":"ctl"}');
    ok wait_until(sub { ($who->($secret)->{keymeta} // '') eq '{"env":"ctl"}' }, 10, 'ctl meta'),
        'keyauthctl key update --meta';

    # the limit is 1 KiB of compact JSON: {"x":"..."} is 8 bytes and the text
    my $fits = { x => 'a' x 1016 };
    is length($codec->encode($fits)), 1024, 'the test meta is 1,024 bytes';
    $res = $api->(PATCH => "/v1/keys/$id", { meta => $fits });
    is $res->{status}, 200, 'a meta of exactly 1 KiB is taken' or diag $res->{body};
    ok wait_until(sub { length($who->($secret)->{keymeta} // '') == 1024 }, 10, '1 KiB at the edge'),
        '... and reaches the upstream whole';

    my $before = $api->(GET => "/v1/keys/$id")->{body};
    my @bad = ([{ x => 'a' x 1017 }, '1,025 bytes'], [[1], 'an array'], ['gold', 'a string'], [5, 'a number'],
               [JSON::PP::true, 'true']);
    for my $b (@bad) {
        my $r = $api->(PATCH => "/v1/keys/$id", { meta => $b->[0] });
        is "$r->{status} $r->{code}", '400 VALIDATION_ERROR', "meta as $b->[1]: 400";
        is $r->{json}{error}{field}, 'meta', '... naming the field';
    }
    # a byte that is not UTF-8, sent as it is
    my $r = $api->(PATCH => "/v1/keys/$id", "{\"meta\":{\"t\":\"\xff\"}}");
    is "$r->{status} $r->{json}{error}{field}", '400 meta', 'meta with a byte that is not UTF-8: 400 naming meta';
    $r = $api->(POST => '/v1/keys', "{\"name\":\"n\",\"scopes\":[\"ip:read\"],\"rateLimitPerMinute\":5,\"meta\":{\"t\":\"\xc3\"}}");
    is "$r->{status} $r->{json}{error}{field}", '400 meta', '... on create too';
    is $api->(GET => "/v1/keys/$id")->{body}, $before, 'the key is unchanged';
    my ($rc, undef, $err) = $t->ctl_raw('key', 'update', $id, '--meta', '[1]');
    is $rc, 2, 'keyauthctl --meta [1]: exit 2';
    like $err, qr/--meta/, '... naming --meta';
    ($rc, undef, $err) = $t->ctl_raw('account', 'update', $acc->{id}, '--meta', '{"a":');
    is $rc, 2, 'keyauthctl --meta that is not JSON: exit 2';

    my $audit = $api->(GET => '/v1/audit?limit=100')->{json}{events};
    my ($ev) = grep { $_->{action} eq 'key.update' && $_->{changes}{meta} } @$audit;
    is_deeply $ev && $ev->{changes}{meta}{to}, { x => 'a' x 1016 }, 'meta changes are in the audit trail';
    my ($create) = grep { $_->{action} eq 'key.create' && $_->{target}{id} eq $id } @$audit;
    is_deeply $create->{changes}{meta}{to}, { env => 'prod', 'région' => 'Zürich' }, '... and the create';

    my $rolled = $api->(POST => "/v1/keys/$id/roll", { gracePeriodSeconds => 0 });
    is_deeply $rolled->{json}{meta}, { x => 'a' x 1016 }, 'a roll keeps the meta' or diag $rolled->{body};

    # the business's own services: the admin API sets an account's meta
    my $admin = $t->admin_client($ops->{token});
    $res = $admin->(POST => '/v1/admin/accounts', { name => "signup-$mode", rateLimitPerMinute => 60,
                                                     externalId => "cus-$mode", meta => { tenant => 'acme' } });
    is $res->{status}, 201, 'admin API: an account created with meta' or diag $res->{body};
    is_deeply $res->{json}{meta}, { tenant => 'acme' }, '... in the answer';
    my $other = $res->{json}{id};
    $res = $admin->(PATCH => "/v1/admin/accounts/$other", { meta => [1] });
    is "$res->{status} $res->{json}{error}{field}", '400 meta', 'admin API PATCH meta [1]: 400 naming meta';
    $res = $admin->(PATCH => "/v1/admin/accounts/$other", { meta => { tenant => 'acme', tier => 2 } });
    is_deeply [$res->{status}, $res->{json}{meta}], [200, { tenant => 'acme', tier => 2 }], 'admin API PATCH meta'
        or diag $res->{body};
    $res = $admin->(PATCH => "/v1/admin/accounts/$other", { meta => undef });
    is_deeply [$res->{status}, $res->{json}{meta}], [200, undef], '... null removes it';
}

run_mode('single host');
my $etcd = EtcdCluster->new(members => 1);
run_mode('many edges', etcd => $etcd->endpoints);

done_testing;
