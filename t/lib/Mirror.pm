package Mirror;

# Compares an edge's LMDB mirror with etcd, record by record: every table of
# the store (the derived ones too: the etcd backend writes the same index
# records LMDB derives) must hold exactly what etcd holds under the prefix,
# byte for byte; of meta, only the mirrored names (catalog_version,
# fx_usd_inr) are compared, since the rest belongs to each environment.
# LMDB is read with mdb_dump (lmdb-utils), etcd with etcdctl. Core Perl only.
#
#   my @diff = Mirror::differences($edge_db_dir, $etcd_cluster);
#   my @diff = Mirror::differences($edge_db_dir, Mirror::etcd_records($etcd_cluster));
#   is_deeply \@diff, [], 'the mirror equals etcd';

use strict;
use warnings;
use MIME::Base64 qw(decode_base64);
use JSON::PP qw(decode_json);

our $PREFIX = '/keyauth/1';
my @TABLES = qw(keys_by_hash keys account_keys accounts console_tokens plans meta);
my %MIRRORED_META = map { unpack('H*', $_) => 1 } qw(catalog_version fx_usd_inr);

# table => { hex key => hex value } of an LMDB environment. Schema 3 keeps
# keys_by_hash (hash -> record) and keys (id -> hash) as key_records (id ->
# hash ++ record): they are read out of it, as etcd holds them.
sub lmdb_records {
    my ($dir) = @_;
    my %all;
    for my $table ('key_records', grep { $_ ne 'keys_by_hash' && $_ ne 'keys' } @TABLES) {
        open my $fh, '-|', 'mdb_dump', '-s', $table, $dir or die "mdb_dump: $!";
        my ($in_data, $key) = (0, undef);
        while (my $line = <$fh>) {
            chomp $line;
            if ($line eq 'HEADER=END') { $in_data = 1; next }
            last if $line eq 'DATA=END';
            next unless $in_data;
            $line =~ s/^ //;
            if (defined $key) { $all{$table}{$key} = $line; $key = undef }
            else { $key = $line }
        }
        close $fh;
        $all{$table} //= {};
    }
    my $records = delete $all{key_records};
    $all{keys_by_hash} = {};
    $all{keys} = {};
    for my $id (keys %$records) {
        my ($hash, $record) = (substr($records->{$id}, 0, 64), substr($records->{$id}, 64));
        $all{keys_by_hash}{$hash} = $record;
        $all{keys}{$id} = $hash;
    }
    delete $all{meta}{$_} for grep { !$MIRRORED_META{$_} } keys %{ $all{meta} };
    return \%all;
}

# The same of what etcd holds under the prefix.
sub etcd_records {
    my ($etcd) = @_;
    my ($rc, $out) = $etcd->etcdctl('get', '--prefix', "$PREFIX/", '-w', 'json');
    die "etcdctl get failed: $out" if $rc != 0;
    my $answer = decode_json($out);
    my %all = map { $_ => {} } @TABLES;
    for my $kv (@{ $answer->{kvs} // [] }) {
        my $key = decode_base64($kv->{key});
        next unless $key =~ m{^\Q$PREFIX\E/([a-z_]+)/([0-9a-f]+)$};
        my ($table, $hex) = ($1, $2);
        next unless exists $all{$table};  # the backend's own (last/...)
        next if $table eq 'meta' && !$MIRRORED_META{$hex};
        $all{$table}{$hex} = unpack('H*', decode_base64($kv->{value} // ''));
    }
    return \%all;
}

# Every difference, as "table key: lmdb X, etcd Y" lines (at most 20).
# $etcd is the cluster, or what etcd_records read from it once for several
# edges (a few MB of JSON at a few thousand keys: seconds of pure Perl).
sub differences {
    my ($dir, $etcd) = @_;
    my ($l, $e) = (lmdb_records($dir), ref $etcd eq 'HASH' ? $etcd : etcd_records($etcd));
    my @diff;
    for my $table (@TABLES) {
        my %keys = (%{ $l->{$table} }, %{ $e->{$table} });
        for my $k (sort keys %keys) {
            my ($lv, $ev) = ($l->{$table}{$k}, $e->{$table}{$k});
            next if defined $lv && defined $ev && $lv eq $ev;
            push @diff, "$table $k: lmdb " . ($lv // 'absent') . ', etcd ' . ($ev // 'absent');
            return @diff if @diff >= 20;
        }
    }
    return @diff;
}

# How many records of a table the LMDB mirror holds.
sub count {
    my ($dir, $table) = @_;
    return scalar keys %{ lmdb_records($dir)->{$table} };
}

1;
