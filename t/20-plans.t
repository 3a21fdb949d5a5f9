# The public plan catalog at the edge: ordering, live USD prices from the
# current exchange rate, one plan by id for the payment service (exact paths
# only), ETag/304, methods, and atomic catalog replacement under load.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Math::BigInt;
use POSIX ();
use Time::HiRes qw(time);
use KeyauthTest;

my $t = KeyauthTest->new;
my $seed = KeyauthTest::root() . '/lmdb_schema/plans.json';
$t->start_nginx(locations => <<'LOC');
        keyauth on;
        location /api/plans { keyauth off; keyauth_plans; }
        location /billing/plans/ { keyauth off; keyauth_plans; }
        location /old-plans/ { rewrite ^/old-plans/(.*)$ /api/plans/$1 last; }
LOC

sub get { $t->request(GET => @_) }
sub code_of { (KeyauthTest::json_body($_[0]) // {})->{error}{code} // '' }

# Reference USD price: round half up of paise * 10^6 / micro, in big integers.
sub usd {
    my ($paise, $micro) = @_;
    my $n = Math::BigInt->new($paise)->bmul(1_000_000);
    my ($q, $r) = $n->copy->bdiv($micro);
    $q->binc if $r->bmul(2) >= $micro;
    my $cents = $q->numify;
    return sprintf '%d.%02d', int($cents / 100), $cents % 100;
}

subtest 'no exchange rate yet: 503, never a made-up price' => sub {
    $t->ctl('plans', 'import', $seed);
    my $res = get('/api/plans');
    is $res->{status}, 503, 'status 503';
    is code_of($res), 'EXCHANGE_RATE_UNAVAILABLE', 'EXCHANGE_RATE_UNAVAILABLE';
    is get('/api/plans/plus-5k')->{status}, 503, 'a single plan too';
};

my $seed_doc = decode_json(do { local (@ARGV, $/) = ($seed); <> });
my %inr = map { $_->{id} => $_->{priceInr} } @{ $seed_doc->{plans} };

subtest 'the catalog' => sub {
    $t->ctl('fx', 'set', '83.123456');
    my $res = get('/api/plans');
    is $res->{status}, 200, 'status 200';
    like KeyauthTest::header($res, 'Content-Type'), qr{^application/json}, 'JSON';
    is KeyauthTest::header($res, 'Cache-Control'), 'no-cache', 'caches must revalidate';
    my $plans = KeyauthTest::json_body($res)->{plans};
    is scalar @$plans, 10, 'ten plans';
    my @orders = map { $_->{sortOrder} } @$plans;
    is_deeply \@orders, [sort { $a <=> $b } @orders], 'ordered by sortOrder';
    is scalar(grep { $_->{popular} } @$plans), 1, 'exactly one popular plan';
    is $plans->[0]{id}, 'trial-100', 'cheapest first';
    is $plans->[-1]{id}, 'unlimited', 'the unlimited plan last';
    like $plans->[-1]{features}[0], qr/Unlimited pages/, 'an unlimited-pages top plan';
    for my $p (@$plans) {
        is_deeply [sort keys %$p],
            [sort qw(id name priceInr priceUsd exchangeRate features popular sortOrder)],
            "$p->{id}: exactly the documented fields" if $p == $plans->[0];
        is $p->{exchangeRate}, '83.123456', "$p->{id}: exchangeRate as a string";
        is $p->{priceUsd}, usd($p->{priceInr} * 100, 83123456), "$p->{id}: priceUsd = $p->{priceUsd}";
        cmp_ok $p->{priceInr}, '==', $inr{ $p->{id} }, "$p->{id}: priceInr as stored";
    }
    like $res->{body}, qr/"priceInr":199,/, 'priceInr is a JSON number';
};

subtest 'one plan, for the payment service' => sub {
    my $res = get('/api/plans/plus-5k');
    is $res->{status}, 200, 'status 200';
    my $p = KeyauthTest::json_body($res);
    is $p->{id}, 'plus-5k', 'that plan';
    is $p->{priceInr}, 3499, 'the INR amount to charge';
    ok $p->{popular}, 'popular';
    my $nf = get('/api/plans/no-such-plan');
    is $nf->{status}, 404, 'unknown id: 404';
    is code_of($nf), 'PLAN_NOT_FOUND', 'PLAN_NOT_FOUND';
    is get('/api/plans/plus-5k/x')->{status}, 404, 'a deeper path: 404';
    is get('/api/plans/' . ('a' x 500))->{status}, 404, 'a long id: 404';
    is get('/api/plans/')->{status}, 200, 'trailing slash: the catalog';
    is get('/api/plans/PLUS-5K')->{status}, 404, 'ids are case-sensitive';
};

# Matching is exact on the normalized URI, and a plan is served only for a
# path the client spelled in that normal form: a 200 for /api/plans/{id}
# means that very id exists (the payment service's check).
subtest 'routing: only the exact paths answer' => sub {
    my %is_plan = (
        '/api/plans/plus-5k'          => 'the id exactly',
        '/api/plans/plus-5k?x=1'      => 'a query string is not part of the path',
        '/api/plans/plus-5k?a=/../b'  => '... whatever it holds',
        '/billing/plans/plus-5k'      => 'under another prefix (location /billing/plans/)',
        '/old-plans/plus-5k'          => 'a URI made by a rewrite is taken as it is',
        'http://localhost/api/plans/plus-5k' => 'an absolute-form request target',
    );
    for my $path (sort keys %is_plan) {
        my $res = get($path);
        is $res->{status}, 200, "$path: 200 ($is_plan{$path})";
        is((KeyauthTest::json_body($res) // {})->{id}, 'plus-5k', "$path: the plan");
    }
    for my $path ('/api/plans?x=1', '/billing/plans/', '/old-plans/') {
        my $res = get($path);
        is $res->{status}, 200, "$path: 200";
        is scalar @{ (KeyauthTest::json_body($res) // {})->{plans} // [] }, 10, "$path: the catalog";
    }
    my %not_found = (
        # prefixes and suffixes around the location and the id
        '/api/plansplus-5k'            => 'the prefix location also matches this',
        '/api/plans-plus-5k'           => 'the prefix followed by a dash',
        '/api/plans.json'              => 'the prefix with an extension',
        '/api/plans/plus-5k.json'      => 'the id with an extension',
        '/api/plans/plus-5kx'          => 'a longer id',
        '/api/plans/xplus-5k'          => 'a longer id, in front',
        '/api/plans/plus'              => 'a shorter id',
        '/api/plans/plus-5k/x'         => 'a deeper path',
        '/api/plans/plus-5k/'          => 'a trailing slash on an id',
        '/api/plans/plus-5k;v=1'       => 'a path parameter',
        # percent-encoded characters: plan ids never need encoding
        '/api/plans/plus%2D5k'         => 'an encoded "-" inside the id',
        '/api/plans/plus-5k%2d'        => 'an encoded "-" after the id',
        '/api/plans/%70lus-5k'         => 'an encoded letter',
        '/api/plans%2Fplus-5k'         => 'an encoded slash before the id',
        '/api/plans/plus-5k%2F'        => 'an encoded slash after the id',
        '/api/%70lans/plus-5k'         => 'an encoded letter in the prefix',
        '/api/plans/plus-5k%20'        => 'an encoded space',
        # dot segments, plain and encoded
        '/api/plans/./plus-5k'         => 'a "." segment',
        '/api/plans/x/../plus-5k'      => 'a ".." segment',
        '/api/x/../plans/plus-5k'      => 'a ".." segment before the prefix',
        '/api/plans/%2e/plus-5k'       => 'an encoded "." segment',
        '/api/plans/x%2F..%2Fplus-5k'  => 'an encoded ".." segment',
        '/api/plans/plus-5k/.'         => 'a "." segment after the id',
        '/api/plans/.'                 => 'a "." segment for the catalog',
        # double slashes
        '/api/plans//plus-5k'          => 'a double slash before the id',
        '/api//plans/plus-5k'          => 'a double slash inside the prefix',
        '//api/plans/plus-5k'          => 'a double slash in front',
        '/api/plans//'                 => 'a double slash for the catalog',
        # a fragment has no place in a request target
        '/api/plans/plus-5k#x'         => 'a fragment',
        # the same rules under another prefix
        '/billing/plans/plus%2D5k'     => 'another prefix: encoded',
        '/billing/plans/plus-5k/'      => 'another prefix: trailing slash',
    );
    for my $path (sort keys %not_found) {
        my $res = get($path);
        is $res->{status}, 404, "$path: 404 ($not_found{$path})";
        my $body = KeyauthTest::json_body($res) // {};
        is_deeply [sort keys %$body], ['error'], "$path: the error layout";
        is $body->{error}{code}, 'PLAN_NOT_FOUND', "$path: PLAN_NOT_FOUND";
        like $body->{error}{message} // '', qr/\S/, "$path: with a message";
        like KeyauthTest::header($res, 'Content-Type') // '', qr{^application/json}, "$path: JSON";
    }
    my $head = $t->request(HEAD => '/api/plans/plus-5k%2D');
    is $head->{status}, 404, 'HEAD of a non-exact path: 404';
    is $head->{body}, '', '... without a body';
    is $t->request(HEAD => '/api/plans/plus-5k')->{status}, 200, 'HEAD of a plan: 200';
};

subtest 'a new exchange rate shows at once' => sub {
    my $before = get('/api/plans');
    my $etag = KeyauthTest::header($before, 'ETag');
    like $etag, qr/^"[^"]+"$/, 'ETag';
    $t->ctl('fx', 'set', '90');
    my $after = get('/api/plans');
    my $p = KeyauthTest::json_body($after)->{plans}[0];
    is $p->{exchangeRate}, '90', 'the new rate';
    is $p->{priceUsd}, usd(19900, 90_000_000), 'the new USD price';
    isnt KeyauthTest::header($after, 'ETag'), $etag, 'a new ETag';
    is get('/api/plans/trial-100')->{status}, 200, 'single plans follow too';
    is KeyauthTest::json_body(get('/api/plans/trial-100'))->{priceUsd}, usd(19900, 90_000_000),
        '... with the new price';
};

subtest 'conditional requests, HEAD and other methods' => sub {
    my $res = get('/api/plans');
    my $etag = KeyauthTest::header($res, 'ETag');
    my $nm = get('/api/plans', "If-None-Match: $etag");
    is $nm->{status}, 304, 'If-None-Match with the current ETag: 304';
    is $nm->{body}, '', '304 has no body';
    is get('/api/plans', 'If-None-Match: "stale"')->{status}, 200, 'a stale ETag: 200';
    is get('/api/plans', "If-None-Match: \"x\", $etag")->{status}, 304, 'one of several: 304';
    my $head = $t->request(HEAD => '/api/plans');
    is $head->{status}, 200, 'HEAD: 200';
    is $head->{body}, '', 'HEAD: no body';
    is KeyauthTest::header($head, 'Content-Length'), length($res->{body}), 'HEAD: same length';
    for my $method (qw(POST PUT PATCH DELETE OPTIONS)) {
        for my $path ('/api/plans', '/api/plans/plus-5k', '/api/plansplus-5k') {
            my $res = $t->request($method => $path, \'{}');
            is $res->{status}, 405, "$method $path: 405";
            is KeyauthTest::header($res, 'Allow'), 'GET, HEAD', "$method $path: Allow: GET, HEAD";
            is code_of($res), 'METHOD_NOT_ALLOWED', "$method $path: METHOD_NOT_ALLOWED";
        }
    }
};

subtest 'bad catalogs are refused whole, the old one stays' => sub {
    my $good = get('/api/plans')->{body};
    my @bad = (
        ['two popular', sub { $_[0]{plans}[0]{popular} = JSON::PP::true }, qr/exactly one plan must be popular/],
        ['duplicate id', sub { $_[0]{plans}[1]{id} = $_[0]{plans}[0]{id} }, qr/plans\[1\]\.id.*twice/],
        ['zero price', sub { $_[0]{plans}[2]{priceInr} = 0 }, qr/plans\[2\]\.priceInr/],
        ['float price', sub { $_[0]{plans}[2]{priceInr} = 19.999 }, qr/plans\[2\]\.priceInr/],
        ['3 decimals', sub { $_[0]{plans}[2]{priceInr} = '19.999' }, qr/plans\[2\]\.priceInr/],
        ['duplicate sortOrder', sub { $_[0]{plans}[3]{sortOrder} = 10 }, qr/plans\[3\]\.sortOrder.*twice/],
        ['computed field', sub { $_[0]{plans}[0]{priceUsd} = '1.00' }, qr/plans\[0\]\.priceUsd: unknown field/],
        ['missing name', sub { delete $_[0]{plans}[4]{name} }, qr/plans\[4\]\.name: is missing/],
        ['bad id', sub { $_[0]{plans}[0]{id} = 'Bad Id' }, qr/plans\[0\]\.id/],
        ['no features', sub { $_[0]{plans}[0]{features} = [] }, qr/plans\[0\]\.features/],
        ['empty catalog', sub { $_[0]{plans} = [] }, qr/at least one plan/],
        # issue 28: malformed entitlements name the plan and the field
        ['quota units 0', sub { $_[0]{plans}[1]{entitlements}{quota}{units} = 0 },
         qr/plans\[1\]\.entitlements\.quota\.units.*\(plan "starter-500"\)/],
        ['quota units negative', sub { $_[0]{plans}[1]{entitlements}{quota}{units} = -1 },
         qr/plans\[1\]\.entitlements\.quota\.units/],
        ['quota units over 2^53', sub { $_[0]{plans}[1]{entitlements}{quota}{units} = 9007199254740993 },
         qr/plans\[1\]\.entitlements\.quota\.units/],
        ['unknown period', sub { $_[0]{plans}[1]{entitlements}{quota}{period} = 'week' },
         qr/plans\[1\]\.entitlements\.quota\.period/],
        ['total on a plan', sub { $_[0]{plans}[1]{entitlements}{quota}{period} = 'total' },
         qr/plans\[1\]\.entitlements\.quota\.period.*total/],
        ['unknown entitlement', sub { $_[0]{plans}[1]{entitlements}{burst} = 5 },
         qr/plans\[1\]\.entitlements\.burst: unknown field/],
        ['maxKeys a string', sub { $_[0]{plans}[1]{entitlements}{maxKeys} = '3' },
         qr/plans\[1\]\.entitlements\.maxKeys/],
    );
    for my $case (@bad) {
        my ($name, $mutate, $re) = @$case;
        my $doc = decode_json(encode_json($seed_doc));
        $mutate->($doc);
        my $file = $t->dir . '/bad.json';
        open my $fh, '>', $file or die $!;
        print $fh encode_json($doc);
        close $fh;
        my ($rc, undef, $err) = $t->ctl_raw('plans', 'import', $file);
        is $rc, 2, "$name: refused, exit 2";
        like $err, $re, "$name: says why";
    }
    my ($rc, undef, $err) = $t->ctl_raw('plans', 'import', '/nonexistent.json');
    is $rc, 1, 'missing file: refused';
    for my $rate ('0', '-1', '1e3', '83.1234567', 'abc', '') {
        my ($rrc) = $t->ctl_raw('fx', 'set', $rate);
        is $rrc, 2, "fx set '$rate': refused";
    }
    is get('/api/plans')->{body}, $good, 'the catalog is unchanged';
};

subtest 'imports under load: never a half-written catalog' => sub {
    my $small = { plans => [ map { { %{ $seed_doc->{plans}[$_] } } } 0 .. 2 ] };
    $small->{plans}[0]{popular} = JSON::PP::true;
    $_->{priceInr} = 1000 for @{ $small->{plans} };
    my $small_file = $t->dir . '/small.json';
    open my $fh, '>', $small_file or die $!;
    print $fh encode_json($small);
    close $fh;
    my $pid = fork // die;
    if ($pid == 0) {
        my $deadline = time + 3;
        while (time < $deadline) {
            $t->ctl_raw('plans', 'import', $small_file);
            $t->ctl_raw('plans', 'import', $seed);
        }
        POSIX::_exit(0);
    }
    my ($requests, $torn, %shapes) = (0, 0);
    my $deadline = time + 3;
    while (time < $deadline) {
        my $plans = KeyauthTest::json_body(get('/api/plans'))->{plans} or next;
        $requests++;
        my $n = @$plans;
        my $ok = ($n == 10 && !grep { $_->{priceInr} == 1000 } @$plans)
              || ($n == 3 && !grep { $_->{priceInr} != 1000 } @$plans);
        $torn++ unless $ok;
        $shapes{$n}++;
    }
    waitpid $pid, 0;
    cmp_ok $requests, '>', 50, "$requests catalog reads during the imports";
    is $torn, 0, 'every read saw one whole catalog';
    ok keys(%shapes) == 2, 'both catalogs were seen (' . join(', ', map { "$_ plans: $shapes{$_}" } sort keys %shapes) . ')';
    $t->ctl('plans', 'import', $seed);
};

done_testing;
