// credentials::SecretStore and the AEAD under it: values round-trip and never leave through List
// or an error; a wrong, missing or rotated master key is told apart at open; a tampered or moved
// row does not decrypt; the lookup order; read-only opening; the signing keys.
#include "credentials/secret_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <climits>
#include <filesystem>
#include <string>

#include "testing.h"
#include <tuple>
#include <vector>

#include "credentials/aead.h"

namespace warden::credentials {
namespace {

using testing::Contains;
using testing::Lacks;

// A key whose 32 bytes are all `fill`.
MasterKey Key(unsigned char fill) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (int i = 0; i < 32; ++i) {
    text += kHex[fill >> 4];
    text += kHex[fill & 0xf];
  }
  auto key = ParseMasterKey(text, "test");
  EXPECT_TRUE(key) << key.status().message();
  return *key;
}

KeyRing Ring(std::vector<MasterKey> keys) { return KeyRing{std::move(keys)}; }

std::string NotConfigured(const std::string& what, const std::string& key_id) {
  return what + " is encrypted under master key " + key_id +
         ", which is not configured: set credentials.master_key to that key, or list it in "
         "credentials.previous_keys";
}

class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/warden-secret-store-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/warden.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<std::unique_ptr<SecretStore>> TryOpen(KeyRing ring, bool create = true) {
    state::DatabaseOptions options;
    options.path = path_;
    options.create = create;
    return SecretStore::Open(options, std::move(ring));
  }
  std::unique_ptr<SecretStore> MustOpen(KeyRing ring, bool create = true) {
    auto store = TryOpen(std::move(ring), create);
    EXPECT_TRUE(store) << store.status().message();
    return store ? std::move(*store) : nullptr;
  }

  // Runs SQL on a connection of its own, as someone with the file would.
  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "") << "\n" << sql;
    sqlite3_free(error);
    sqlite3_close(db);
  }

  // Flips one bit of byte `offset` of a BLOB column of the rows `where` selects.
  void FlipByte(const std::string& table, const std::string& column, const std::string& where,
                int offset) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* read = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(
                  db, ("SELECT rowid, " + column + " FROM " + table + " WHERE " + where).c_str(),
                  -1, &read, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::vector<std::pair<int64_t, std::string>> rows;
    while (sqlite3_step(read) == SQLITE_ROW) {
      const char* blob = static_cast<const char*>(sqlite3_column_blob(read, 1));
      rows.emplace_back(sqlite3_column_int64(read, 0),
                        std::string(blob, static_cast<size_t>(sqlite3_column_bytes(read, 1))));
    }
    sqlite3_finalize(read);
    ASSERT_FALSE(rows.empty()) << where;
    for (auto& [rowid, blob] : rows) {
      ASSERT_LT(static_cast<size_t>(offset), blob.size());
      blob[static_cast<size_t>(offset)] ^= 0x01;
      sqlite3_stmt* write = nullptr;
      ASSERT_EQ(sqlite3_prepare_v2(
                    db, ("UPDATE " + table + " SET " + column + " = ?1 WHERE rowid = ?2").c_str(),
                    -1, &write, nullptr),
                SQLITE_OK);
      sqlite3_bind_blob(write, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      sqlite3_bind_int64(write, 2, rowid);
      EXPECT_EQ(sqlite3_step(write), SQLITE_DONE) << sqlite3_errmsg(db);
      sqlite3_finalize(write);
    }
    sqlite3_close(db);
  }

  bool HasTable(const std::string& table) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1,
                       &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, table.c_str(), -1, SQLITE_TRANSIENT);
    const bool found = sqlite3_step(stmt) == SQLITE_ROW;
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return found;
  }

  std::string dir_, path_;
};

// --- AEAD ---

TEST(Aead, RoundTripsAndBindsTheAssociatedData) {
  const MasterKey key = Key(7);
  auto sealed = Seal(key, "hello", "aad");
  ASSERT_TRUE(sealed) << sealed.status().message();
  EXPECT_EQ(sealed->nonce.size(), 12u);
  EXPECT_EQ(sealed->ciphertext.size(), 5u + 16u);
  EXPECT_TRUE(Lacks(sealed->ciphertext, "hello"));
  auto opened = Open(key, *sealed, "aad");
  ASSERT_TRUE(opened) << opened.status().message();
  EXPECT_EQ(*opened, "hello");

  const std::string refused =
      "the ciphertext does not decrypt under key " + key.id + " (tampered, or another key)";
  auto other_aad = Open(key, *sealed, "aae");
  ASSERT_FALSE(other_aad);
  EXPECT_EQ(other_aad.status().message(), refused);
  auto other_key = Open(Key(8), *sealed, "aad");
  ASSERT_FALSE(other_key);
  EXPECT_TRUE(Contains(other_key.status().message(), "does not decrypt"));

  Sealed short_nonce = *sealed;
  short_nonce.nonce.pop_back();
  EXPECT_EQ(Open(key, short_nonce, "aad").status().message(), refused);
  Sealed short_text = *sealed;
  short_text.ciphertext.resize(15);
  EXPECT_EQ(Open(key, short_text, "aad").status().message(), refused);
  Sealed flipped = *sealed;
  flipped.ciphertext[0] ^= 1;
  EXPECT_EQ(Open(key, flipped, "aad").status().message(), refused);
}

TEST(Aead, FreshNonceEachTimeAndEmptyPlaintext) {
  const MasterKey key = Key(7);
  auto a = Seal(key, "same", "aad");
  auto b = Seal(key, "same", "aad");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->nonce, b->nonce);
  EXPECT_NE(a->ciphertext, b->ciphertext);

  auto empty = Seal(key, "", "");
  ASSERT_TRUE(empty) << empty.status().message();
  EXPECT_EQ(empty->ciphertext.size(), 16u);
  auto opened = Open(key, *empty, "");
  ASSERT_TRUE(opened) << opened.status().message();
  EXPECT_EQ(*opened, "");
}

// --- The store ---

TEST_F(SecretStoreTest, RoundTripReplaceRemoveAndReopen) {
  const MasterKey key = Key(1);
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  const SecretScope scope{"acme", "bob", "tracker"};
  ASSERT_TRUE(store->Set(scope, "api_key", "s3cret-value-1").ok());

  auto got = store->Get("acme", "bob", "tracker", "api_key");
  ASSERT_TRUE(got) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, "s3cret-value-1");
  EXPECT_EQ((*got)->info.scope.tenant, "acme");
  EXPECT_EQ((*got)->info.scope.user, "bob");
  EXPECT_EQ((*got)->info.scope.upstream, "tracker");
  EXPECT_EQ((*got)->info.name, "api_key");
  EXPECT_EQ((*got)->info.key_id, key.id);
  EXPECT_EQ((*got)->info.size, 14u);
  EXPECT_GT((*got)->info.created_ms, 0);
  const int64_t created = (*got)->info.created_ms;

  // Binary values (NUL included) survive.
  const std::string binary("a\0b\xff\x01z", 6);
  ASSERT_TRUE(store->Set(scope, "api_key", binary).ok());
  got = store->Get("acme", "bob", "tracker", "api_key");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, binary);
  EXPECT_EQ((*got)->info.created_ms, created);  // replacing keeps when it was first made
  EXPECT_GE((*got)->info.updated_ms, created);

  store.reset();
  store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  got = store->Get("acme", "bob", "tracker", "api_key");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, binary);

  auto removed = store->Remove(scope, "api_key");
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  removed = store->Remove(scope, "api_key");
  ASSERT_TRUE(removed);
  EXPECT_FALSE(*removed);
  got = store->Get("acme", "bob", "tracker", "api_key");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
}

TEST_F(SecretStoreTest, SingleUserModeHasNoTenant) {
  auto store = MustOpen(Ring({Key(1)}));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Set({}, "token", "single-user-value").ok());
  auto got = store->Get("", "", "", "token");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, "single-user-value");
  got = store->Get("", "local", "github", "token");  // falls back to the tenant's (none) secret
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, "single-user-value");
}

TEST_F(SecretStoreTest, WrongKeyRefusesToOpenWithTheDocumentedMessage) {
  const MasterKey right = Key(1), wrong = Key(2);
  {
    auto store = MustOpen(Ring({right}));
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Set({"acme", "", ""}, "api_key", "value-under-right-key").ok());
  }
  auto opened = TryOpen(Ring({wrong}));
  ASSERT_FALSE(opened);
  EXPECT_TRUE(
      Contains(opened.status().message(), NotConfigured("secret api_key (tenant acme)", right.id)));
  EXPECT_TRUE(Contains(opened.status().message(), path_));
  EXPECT_TRUE(Lacks(opened.status().message(), "value-under-right-key"));

  // Read-only opening checks the same.
  auto reader = TryOpen(Ring({wrong}), /*create=*/false);
  ASSERT_FALSE(reader);
  EXPECT_TRUE(Contains(reader.status().message(), right.id));
}

TEST_F(SecretStoreTest, WrongKeyIsReportedForSigningKeysToo) {
  const MasterKey right = Key(1);
  {
    auto store = MustOpen(Ring({right}));
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->AddSigningKey("kid1", "der-bytes", 1000).ok());
  }
  auto opened = TryOpen(Ring({Key(2)}));
  ASSERT_FALSE(opened);
  EXPECT_TRUE(Contains(opened.status().message(), NotConfigured("signing key kid1", right.id)));
}

TEST_F(SecretStoreTest, TamperedCiphertextFailsGetAndOpen) {
  const MasterKey key = Key(1);
  {
    auto store = MustOpen(Ring({key}));
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Set({"acme", "bob", ""}, "api_key", "tamper-me-value").ok());
    ASSERT_TRUE(store->Set({"acme", "bob", ""}, "other", "untouched-value").ok());
  }
  // A store that is already open finds out at Get.
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  FlipByte("credentials_secrets", "ciphertext", "name = 'api_key'", 3);
  auto got = store->Get("acme", "bob", "", "api_key");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.status().message(),
            "secret api_key (tenant acme): the ciphertext does not decrypt under key " + key.id +
                " (tampered, or another key)");
  auto untouched = store->Get("acme", "bob", "", "other");
  ASSERT_TRUE(untouched && untouched->has_value());
  EXPECT_EQ((*untouched)->value, "untouched-value");
  store.reset();

  // A new one at Open: api_key sorts first, so it is the row Open tries for this key.
  auto opened = TryOpen(Ring({key}));
  ASSERT_FALSE(opened);
  EXPECT_TRUE(Contains(opened.status().message(), "secret api_key (tenant acme)"));
  EXPECT_TRUE(Contains(opened.status().message(), "does not decrypt"));
}

TEST_F(SecretStoreTest, TamperedTagAndNonceAreCaughtToo) {
  const MasterKey key = Key(1);
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Set({"acme", "", ""}, "a", "value-a-123").ok());
  ASSERT_TRUE(store->Set({"acme", "", ""}, "b", "value-b-123").ok());
  FlipByte("credentials_secrets", "ciphertext", "name = 'a'", 11 + 15);  // the tag's last byte
  FlipByte("credentials_secrets", "nonce", "name = 'b'", 0);
  EXPECT_FALSE(store->Get("acme", "", "", "a"));
  EXPECT_FALSE(store->Get("acme", "", "", "b"));
}

TEST_F(SecretStoreTest, RowCopiedElsewhereDoesNotDecrypt) {
  const MasterKey key = Key(1);
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Set({"acme", "bob", "tracker"}, "api_key", "bobs-tracker-value").ok());
  const std::string copy =
      "INSERT INTO credentials_secrets SELECT {tenant}, {user}, {upstream}, {name}, key_id, "
      "nonce, ciphertext, created_ms, updated_ms FROM credentials_secrets WHERE tenant = 'acme' "
      "AND user = 'bob' AND upstream = 'tracker' AND "
      "name = 'api_key'";
  auto copy_as = [&](std::string tenant, std::string user, std::string upstream, std::string name) {
    std::string sql = copy;
    for (auto [field, value] : {std::pair{"{tenant}", tenant},
                                {"{user}", user},
                                {"{upstream}", upstream},
                                {"{name}", name}}) {
      sql.replace(sql.find(field), std::string(field).size(), value);
    }
    Sql(sql);
  };
  copy_as("tenant", "user", "upstream", "'other_key'");
  copy_as("tenant", "'alice'", "upstream", "name");
  copy_as("tenant", "user", "'mail'", "name");
  copy_as("'globex'", "user", "upstream", "name");

  const struct {
    const char *tenant, *user, *upstream, *name;
  } copies[] = {{"acme", "bob", "tracker", "other_key"},
                {"acme", "alice", "tracker", "api_key"},
                {"acme", "bob", "mail", "api_key"},
                {"globex", "bob", "tracker", "api_key"}};
  for (const auto& c : copies) {
    auto got = store->Get(c.tenant, c.user, c.upstream, c.name);
    ASSERT_FALSE(got) << c.tenant << "/" << c.user << "/" << c.upstream << "/" << c.name;
    EXPECT_TRUE(Contains(got.status().message(), "does not decrypt"));
    EXPECT_TRUE(Lacks(got.status().message(), "bobs-tracker-value"));
  }
  auto original = store->Get("acme", "bob", "tracker", "api_key");
  ASSERT_TRUE(original && original->has_value());
  EXPECT_EQ((*original)->value, "bobs-tracker-value");

  // A new store finds a moved row at open (acme/alice sorts before acme/bob).
  store.reset();
  auto reopened = TryOpen(Ring({key}));
  ASSERT_FALSE(reopened);
  EXPECT_TRUE(Contains(reopened.status().message(), "does not decrypt"));

  // Relabelling a row with another configured key's id is caught the same way.
  Sql("DELETE FROM credentials_secrets WHERE NOT (tenant = 'acme' AND user = 'bob' AND "
      "upstream = 'tracker' AND name = 'api_key')");
  const MasterKey other = Key(2);
  store = MustOpen(Ring({key, other}));
  ASSERT_TRUE(store);
  Sql("UPDATE credentials_secrets SET key_id = '" + other.id + "'");
  EXPECT_FALSE(store->Get("acme", "bob", "tracker", "api_key"));
}

TEST_F(SecretStoreTest, RotationRewrapsUnderTheNewKey) {
  const MasterKey old_key = Key(1), new_key = Key(2);
  {
    auto store = MustOpen(Ring({old_key}));
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Set({"acme", "", ""}, "one", "value-one-1234").ok());
    ASSERT_TRUE(store->Set({"acme", "bob", "x"}, "two", "value-two-1234").ok());
    ASSERT_TRUE(store->AddSigningKey("kid1", "signing-der", 1000).ok());
  }
  {
    auto store = MustOpen(Ring({new_key, old_key}));
    ASSERT_TRUE(store);
    // Before the rewrap the old rows still read; a new Set goes under the new key.
    auto one = store->Get("acme", "", "", "one");
    ASSERT_TRUE(one && one->has_value());
    EXPECT_EQ((*one)->info.key_id, old_key.id);
    ASSERT_TRUE(store->Set({"acme", "", ""}, "three", "value-three-12").ok());
    auto listed = store->List();
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->size(), 3u);
    EXPECT_EQ((*listed)[0].key_id, old_key.id);  // acme//""/one
    EXPECT_EQ((*listed)[1].key_id, new_key.id);  // acme//""/three

    auto rewrapped = store->Rewrap();
    ASSERT_TRUE(rewrapped) << rewrapped.status().message();
    EXPECT_EQ(*rewrapped, 3u);  // two secrets and the signing key; "three" was already new
    rewrapped = store->Rewrap();
    ASSERT_TRUE(rewrapped);
    EXPECT_EQ(*rewrapped, 0u);
    listed = store->List();
    ASSERT_TRUE(listed);
    for (const SecretInfo& info : *listed) EXPECT_EQ(info.key_id, new_key.id) << info.name;
  }
  auto old_only = TryOpen(Ring({old_key}));
  ASSERT_FALSE(old_only);
  EXPECT_TRUE(
      Contains(old_only.status().message(), NotConfigured("secret one (tenant acme)", new_key.id)));

  auto store = MustOpen(Ring({new_key}));
  ASSERT_TRUE(store);
  for (const auto& [user, upstream, name, value] : {std::tuple{"", "", "one", "value-one-1234"},
                                                    {"bob", "x", "two", "value-two-1234"},
                                                    {"", "", "three", "value-three-12"}}) {
    auto got = store->Get("acme", user, upstream, name);
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_TRUE(got->has_value()) << name;
    EXPECT_EQ((*got)->value, value);
  }
  auto keys = store->SigningKeys();
  ASSERT_TRUE(keys) << keys.status().message();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].private_der, "signing-der");
}

TEST_F(SecretStoreTest, GetPrefersTheMostSpecificSecret) {
  auto store = MustOpen(Ring({Key(1)}));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Set({"acme", "bob", "tracker"}, "key", "bob-tracker").ok());
  ASSERT_TRUE(store->Set({"acme", "bob", ""}, "key", "bob-any").ok());
  ASSERT_TRUE(store->Set({"acme", "", "tracker"}, "key", "tenant-tracker").ok());
  ASSERT_TRUE(store->Set({"acme", "", ""}, "key", "tenant-any").ok());
  ASSERT_TRUE(store->Set({"acme", "bob", "mail"}, "key", "bob-mail").ok());
  ASSERT_TRUE(store->Set({"globex", "", ""}, "key", "globex-any").ok());

  auto value = [&](const std::string& tenant, const std::string& user,
                   const std::string& upstream) -> std::string {
    auto got = store->Get(tenant, user, upstream, "key");
    EXPECT_TRUE(got) << got.status().message();
    if (!got || !got->has_value()) return "(none)";
    return (*got)->value;
  };
  EXPECT_EQ(value("acme", "bob", "tracker"), "bob-tracker");
  EXPECT_EQ(value("acme", "bob", "mail"), "bob-mail");
  EXPECT_EQ(value("acme", "bob", "wiki"), "bob-any");
  EXPECT_EQ(value("acme", "alice", "tracker"), "tenant-tracker");
  EXPECT_EQ(value("acme", "alice", "wiki"), "tenant-any");
  EXPECT_EQ(value("globex", "bob", "tracker"), "globex-any");
  EXPECT_EQ(value("initech", "bob", "tracker"), "(none)");

  // Taking away the most specific one uncovers the next, in order.
  const std::pair<SecretScope, std::string> layers[] = {{{"acme", "bob", "tracker"}, "bob-any"},
                                                        {{"acme", "bob", ""}, "tenant-tracker"},
                                                        {{"acme", "", "tracker"}, "tenant-any"},
                                                        {{"acme", "", ""}, "(none)"}};
  for (const auto& [scope, next] : layers) {
    auto removed = store->Remove(scope, "key");
    ASSERT_TRUE(removed && *removed);
    EXPECT_EQ(value("acme", "bob", "tracker"), next);
  }
  auto found = store->Get("acme", "bob", "mail", "key");
  ASSERT_TRUE(found && found->has_value());
  EXPECT_EQ((*found)->info.scope.upstream, "mail");
}

TEST_F(SecretStoreTest, ListShowsEverythingButTheValue) {
  const MasterKey key = Key(1);
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  // Values that would show up in any field that leaked them, even partly.
  const std::string v1 = "LEAKCHECK-value-one", v2 = "LEAKCHECK-value-two-longer";
  ASSERT_TRUE(store->Set({"globex", "", ""}, "b", v1).ok());
  ASSERT_TRUE(store->Set({"acme", "bob", "tracker"}, "a", v2).ok());
  ASSERT_TRUE(store->Set({"acme", "", ""}, "z", v1).ok());

  auto listed = store->List();
  ASSERT_TRUE(listed) << listed.status().message();
  ASSERT_EQ(listed->size(), 3u);
  // Sorted by tenant, user, upstream, name.
  EXPECT_EQ((*listed)[0].name, "z");
  EXPECT_EQ((*listed)[0].scope.user, "");
  EXPECT_EQ((*listed)[1].name, "a");
  EXPECT_EQ((*listed)[1].scope.user, "bob");
  EXPECT_EQ((*listed)[1].scope.upstream, "tracker");
  EXPECT_EQ((*listed)[1].size, v2.size());
  EXPECT_EQ((*listed)[2].scope.tenant, "globex");
  for (const SecretInfo& info : *listed) {
    for (const std::string* field :
         {&info.scope.tenant, &info.scope.user, &info.scope.upstream, &info.name, &info.key_id}) {
      EXPECT_TRUE(Lacks(*field, "LEAKCHECK"));
    }
    EXPECT_EQ(info.key_id, key.id);
    EXPECT_GT(info.created_ms, 0);
  }

  const std::string acme = "acme";
  auto filtered = store->List(&acme);
  ASSERT_TRUE(filtered);
  ASSERT_EQ(filtered->size(), 2u);
  for (const SecretInfo& info : *filtered) EXPECT_EQ(info.scope.tenant, "acme");
  const std::string nobody = "nobody";
  filtered = store->List(&nobody);
  ASSERT_TRUE(filtered);
  EXPECT_TRUE(filtered->empty());
}

TEST_F(SecretStoreTest, NamesAreChecked) {
  for (const char* good : {"a", "A", "0", "api_key", "a.b-c_d", "Z9"}) {
    EXPECT_TRUE(SecretStore::ValidName(good)) << good;
  }
  EXPECT_TRUE(SecretStore::ValidName(std::string(64, 'n')));
  const std::string bad[] = {"",
                             "_a",
                             ".a",
                             "-a",
                             "a b",
                             "a/b",
                             "a:b",
                             "a{b}",
                             "a\n",
                             "ä",
                             std::string(65, 'n'),
                             std::string("a\0b", 3)};
  auto store = MustOpen(Ring({Key(1)}));
  ASSERT_TRUE(store);
  for (const std::string& name : bad) {
    EXPECT_FALSE(SecretStore::ValidName(name)) << name;
    Status st = store->Set({"acme", "", ""}, name, "some-value-here");
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_TRUE(Contains(st.message(), "secret name"));
    EXPECT_TRUE(Contains(st.message(), "is not valid"));
    EXPECT_TRUE(Lacks(st.message(), "some-value-here"));
    EXPECT_FALSE(store->Get("acme", "", "", name)) << name;
  }
  // Scope fields may not hold control characters (the associated data separates them by NUL).
  Status st = store->Set({std::string("ac\0me", 5), "", ""}, "x", "value-1234");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "tenant"));
  st = store->Set({"acme", "bo\nb", ""}, "x", "value-1234");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "user"));
  auto listed = store->List();
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
}

TEST_F(SecretStoreTest, ValueSizeIsBounded) {
  auto store = MustOpen(Ring({Key(1)}));
  ASSERT_TRUE(store);
  std::string largest(SecretStore::kMaxValueBytes, 'Q');
  ASSERT_TRUE(store->Set({"acme", "", ""}, "big", largest).ok());
  auto got = store->Get("acme", "", "", "big");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, largest);

  std::string over = largest + "Q";
  Status st = store->Set({"acme", "", ""}, "bigger", over);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "secret bigger"));
  EXPECT_TRUE(Contains(st.message(), std::to_string(over.size()) + " bytes"));
  EXPECT_TRUE(Contains(st.message(), std::to_string(SecretStore::kMaxValueBytes)));
  EXPECT_TRUE(Lacks(st.message(), "QQQQ"));
  EXPECT_LT(st.message().size(), 200u);

  st = store->Set({"acme", "", ""}, "empty", "");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "empty"));
  auto missing = store->Get("acme", "", "", "bigger");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());
}

TEST_F(SecretStoreTest, ReadOnlyOpeningCreatesNothing) {
  // A database file some other component made, without the credentials tables.
  Sql("CREATE TABLE unrelated (x)");
  auto store = MustOpen(Ring({Key(1)}), /*create=*/false);
  ASSERT_TRUE(store);
  auto listed = store->List();
  ASSERT_TRUE(listed) << listed.status().message();
  EXPECT_TRUE(listed->empty());
  auto got = store->Get("acme", "bob", "x", "api_key");
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_FALSE(got->has_value());
  auto keys = store->SigningKeys();
  ASSERT_TRUE(keys) << keys.status().message();
  EXPECT_TRUE(keys->empty());
  Status st = store->Set({"acme", "", ""}, "api_key", "value-1234");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "read-only"));
  EXPECT_FALSE(store->AddSigningKey("kid", "der", 1).ok());
  EXPECT_FALSE(store->Rewrap());
  EXPECT_FALSE(store->PruneSigningKeys(1));
  EXPECT_FALSE(store->Remove({"acme", "", ""}, "api_key"));
  store.reset();
  EXPECT_FALSE(HasTable("credentials_secrets"));
  EXPECT_FALSE(HasTable("credentials_signing_keys"));

  // Missing file: an error, and no file appears.
  std::filesystem::remove_all(dir_ + "/absent.db");
  state::DatabaseOptions absent;
  absent.path = dir_ + "/absent.db";
  absent.create = false;
  auto missing = SecretStore::Open(absent, Ring({Key(1)}));
  ASSERT_FALSE(missing);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/absent.db"));
}

TEST_F(SecretStoreTest, ReadOnlyOpeningReadsWhatAWriterStored) {
  const MasterKey key = Key(1);
  auto writer = MustOpen(Ring({key}));
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->Set({"acme", "", ""}, "api_key", "shared-value-1").ok());
  auto reader = MustOpen(Ring({key}), /*create=*/false);
  ASSERT_TRUE(reader);
  auto got = reader->Get("acme", "bob", "", "api_key");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, "shared-value-1");
  auto listed = reader->List();
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->size(), 1u);
}

TEST_F(SecretStoreTest, SigningKeysAddRetirePrune) {
  const MasterKey key = Key(1);
  auto store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  auto keys = store->SigningKeys();
  ASSERT_TRUE(keys);
  EXPECT_TRUE(keys->empty());

  const std::string der1("\x30\x81\x87\x02\x01\x00", 6), der2("\x30\x00second", 8);
  ASSERT_TRUE(store->AddSigningKey("kid1", der1, 1000).ok());
  ASSERT_TRUE(store->AddSigningKey("kid2", der2, 2000).ok());
  Status dup = store->AddSigningKey("kid1", "again", 3000);
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(Contains(dup.message(), "kid1"));
  EXPECT_FALSE(store->AddSigningKey("", "der", 3000).ok());
  EXPECT_FALSE(store->AddSigningKey("has space", "der", 3000).ok());
  EXPECT_FALSE(store->AddSigningKey("kid3", "", 3000).ok());

  keys = store->SigningKeys();
  ASSERT_TRUE(keys) << keys.status().message();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].kid, "kid1");
  EXPECT_EQ((*keys)[0].private_der, der1);
  EXPECT_EQ((*keys)[0].created_ms, 1000);
  EXPECT_EQ((*keys)[0].retired_ms, 2000);  // retired when kid2 arrived
  EXPECT_EQ((*keys)[1].kid, "kid2");
  EXPECT_EQ((*keys)[1].private_der, der2);
  EXPECT_EQ((*keys)[1].retired_ms, 0);

  // Still in its grace period: kept.
  auto pruned = store->PruneSigningKeys(2000);
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 0u);
  pruned = store->PruneSigningKeys(2001);
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 1u);
  // The current key is never pruned.
  pruned = store->PruneSigningKeys(INT64_MAX);
  ASSERT_TRUE(pruned);
  EXPECT_EQ(*pruned, 0u);

  store.reset();
  store = MustOpen(Ring({key}));
  ASSERT_TRUE(store);
  keys = store->SigningKeys();
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].kid, "kid2");
  EXPECT_EQ((*keys)[0].private_der, der2);

  // A signing key moved to another kid does not decrypt.
  Sql("UPDATE credentials_signing_keys SET kid = 'kid9'");
  keys = store->SigningKeys();
  ASSERT_FALSE(keys);
  EXPECT_TRUE(Contains(keys.status().message(), "signing key kid9"));
  EXPECT_TRUE(Contains(keys.status().message(), "does not decrypt"));
}

TEST_F(SecretStoreTest, ChangedElsewhereSeesOtherConnectionsOnly) {
  const MasterKey key = Key(1);
  auto a = MustOpen(Ring({key}));
  auto b = MustOpen(Ring({key}));
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->ChangedElsewhere());
  EXPECT_FALSE(b->ChangedElsewhere());
  ASSERT_TRUE(a->Set({"acme", "", ""}, "api_key", "value-1234").ok());
  EXPECT_FALSE(a->ChangedElsewhere());  // its own write
  EXPECT_TRUE(b->ChangedElsewhere());
  EXPECT_FALSE(b->ChangedElsewhere());  // once per change
  ASSERT_TRUE(a->AddSigningKey("kid", "der-bytes", 5).ok());
  EXPECT_TRUE(b->ChangedElsewhere());
}

TEST_F(SecretStoreTest, EmptyRingIsRefused) {
  auto store = TryOpen(KeyRing{});
  ASSERT_FALSE(store);
  EXPECT_TRUE(Contains(store.status().message(), "no master key"));
}

}  // namespace
}  // namespace warden::credentials
