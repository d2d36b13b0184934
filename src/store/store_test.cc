// Tests of the store's name rules, URL forms, directory backend (including a kill -9 during Put) and
// the S3 XML reader. The S3 backend itself is tested in s3_store_test.cc.
#include "store/store.h"
#include "store/test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "store/s3_store.h"
#include "store/s3_xml.h"

namespace llamay::store {
namespace {

namespace fs = std::filesystem;

using namespace testing_util;

// A fresh folder under the test temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::path(::testing::TempDir()) /
            ("llamay_store_test." + std::to_string(::getpid()) + "." + std::to_string(counter_++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(ObjectName, AcceptsWhatRequestPathsMayCarry) {
  for (const std::string& name :
       std::vector<std::string>{"a",
                                "A",
                                "0",
                                "snap",
                                "a.b",
                                "a_b",
                                "a-b",
                                ".hidden",
                                "..x",
                                "x..",
                                "a...b",
                                "a/b",
                                "a/b/c.d",
                                "models/llama-3/ctx_00001.snap",
                                "-",
                                "_",
                                "a/.b",
                                "a/..b",
                                std::string(512, 'x'),
                                std::string(255, 'a') + "/" + std::string(256, 'b')}) {
    EXPECT_TRUE(ValidObjectName(name)) << name;
  }
}

TEST(ObjectName, RefusesEverythingElse) {
  const std::vector<std::string> refused = {"",
                                            "/",
                                            "/a",
                                            "a/",
                                            "a//b",
                                            ".",
                                            "..",
                                            "../x",
                                            "x/..",
                                            "a/./b",
                                            "a/../b",
                                            "./a",
                                            "a/.",
                                            "a b",
                                            "a\\b",
                                            "a:b",
                                            "a?b",
                                            "a#b",
                                            "a%2Fb",
                                            "a+b",
                                            "a~b",
                                            "a*b",
                                            "a\"b",
                                            std::string("a\0b", 3),
                                            "a\nb",
                                            "a\tb",
                                            "caf\xc3\xa9",
                                            "\xff",
                                            std::string(513, 'x'),
                                            std::string(300, 'a') + "/" + std::string(300, 'b')};
  for (const std::string& name : refused) EXPECT_FALSE(ValidObjectName(name)) << name;
}

TEST(ObjectName, PrefixesAreStartsOfValidNames) {
  for (const char* p : {"", "a", "a/", "a/b", "a/b/", "a/sn", "a/.", "a/..", ".", "..", "snap-"}) {
    EXPECT_TRUE(ValidObjectPrefix(p)) << p;
  }
  for (const char* p : {"/", "/a", "a//", "../", "a/../", "./x", "a b", "a//b", "caf\xc3\xa9"}) {
    EXPECT_FALSE(ValidObjectPrefix(p)) << p;
  }
  EXPECT_FALSE(ValidObjectPrefix(std::string(513, 'a')));
}

TEST(OpenStore, UrlForms) {
  TempDir dir;
  auto plain = OpenStore(dir.path() + "/sub");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->Describe(), "dir " + dir.path() + "/sub");
  EXPECT_TRUE(fs::is_directory(dir.path() + "/sub"));
  auto file = OpenStore("file://" + dir.path() + "/f/");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Describe(), "dir " + dir.path() + "/f");

  StoreOptions o;
  o.endpoint = "http://127.0.0.1:9";
  o.access_key = "AKID";
  o.secret_key = "SECRET-never-shown";
  auto s3 = OpenStore("s3://bucket/some/prefix/", o);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ((*s3)->Describe(), "s3://bucket/some/prefix at http://127.0.0.1:9");
  EXPECT_EQ((*s3)->Describe().find("SECRET"), std::string::npos);

  for (const std::string& bad : {std::string(), std::string("http://x/y"), std::string("file://host/x"),
                                 std::string("s3://"), std::string("s3:///x"), std::string("s3://b/../x"),
                                 std::string("s3://b/a//c"), std::string("s3://b?x/y")}) {
    auto r = OpenStore(bad, o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // A file where the directory should be.
  std::ofstream(dir.path() + "/afile") << "x";
  EXPECT_FALSE(OpenStore(dir.path() + "/afile").ok());
}

TEST(OpenStore, S3UrlParts) {
  auto w = ParseS3Url("s3://my.bucket");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->bucket, "my.bucket");
  EXPECT_EQ(w->prefix, "");
  w = ParseS3Url("s3://b/p/q//");  // trailing '/' are dropped
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->prefix, "p/q");
  EXPECT_FALSE(ParseS3Url("s3://b//q").ok());
}

class DirStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = OpenStore(dir_.path());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(DirStoreTest, PutGetExistsDelete) {
  EXPECT_FALSE(Must(store_->Exists("a")));
  auto missing = store_->Get("a");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(DetailOf(missing.status()), StoreError::kNotFound);
  EXPECT_NE(missing.status().message().find("dir " + dir_.path()), std::string::npos);

  ASSERT_TRUE(store_->Put("a", Bytes("hello")).ok());
  EXPECT_TRUE(Must(store_->Exists("a")));
  EXPECT_EQ(Must(store_->Get("a")), Bytes("hello"));
  // Overwrite, then the same bytes again (idempotent).
  ASSERT_TRUE(store_->Put("a", Bytes("bye")).ok());
  ASSERT_TRUE(store_->Put("a", Bytes("bye")).ok());
  EXPECT_EQ(Must(store_->Get("a")), Bytes("bye"));
  // An empty object is an object.
  ASSERT_TRUE(store_->Put("empty", {}).ok());
  EXPECT_TRUE(Must(store_->Exists("empty")));
  EXPECT_TRUE(Must(store_->Get("empty")).empty());

  ASSERT_TRUE(store_->Delete("a").ok());
  EXPECT_FALSE(Must(store_->Exists("a")));
  EXPECT_TRUE(store_->Delete("a").ok());        // absent is OK
  EXPECT_TRUE(store_->Delete("no/such").ok());  // and so is an absent folder
  EXPECT_EQ(store_->Get("a").status().code(), StatusCode::kNotFound);
}

// Read maps the file: the same bytes as Get, Get's refusals, and the consumer's own error passed through.
TEST_F(DirStoreTest, ReadHandsTheObjectToItsConsumer) {
  std::vector<uint8_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  ASSERT_TRUE(store_->Put("m/big", big).ok());
  ASSERT_TRUE(store_->Put("m/empty", {}).ok());
  std::vector<uint8_t> seen;
  auto keep = [&](std::span<const uint8_t> b) {
    seen.assign(b.begin(), b.end());
    return Status::Ok();
  };
  ASSERT_TRUE(store_->Read("m/big", keep).ok());
  EXPECT_EQ(seen, big);
  ASSERT_TRUE(store_->Read("m/empty", keep).ok());
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(store_->Read("m/none", keep).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Read("../x", keep).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Read("m", keep).code(), StatusCode::kNotFound);  // a folder is not an object
  const Status mine = DataLossError("the consumer refused it");
  EXPECT_EQ(store_->Read("m/big", [&](std::span<const uint8_t>) { return mine; }).message(), mine.message());
}

TEST_F(DirStoreTest, NestedNamesAndList) {
  std::vector<uint8_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + (i >> 13));
  ASSERT_TRUE(store_->Put("m/llama/ctx-2", Bytes("22")).ok());
  ASSERT_TRUE(store_->Put("m/llama/ctx-1", Bytes("1")).ok());
  ASSERT_TRUE(store_->Put("m/qwen/ctx-1", big).ok());
  ASSERT_TRUE(store_->Put("top", Bytes("top")).ok());
  EXPECT_EQ(Must(store_->Get("m/qwen/ctx-1")), big);
  EXPECT_TRUE(fs::is_regular_file(dir_.path() + "/m/llama/ctx-1"));  // plain files, readable by any tool

  auto all = store_->List("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].name, "m/llama/ctx-1");
  EXPECT_EQ((*all)[0].size, 1u);
  EXPECT_EQ((*all)[1].name, "m/llama/ctx-2");
  EXPECT_EQ((*all)[2].name, "m/qwen/ctx-1");
  EXPECT_EQ((*all)[2].size, big.size());
  EXPECT_EQ((*all)[3].name, "top");

  auto llama = store_->List("m/llama/");
  ASSERT_TRUE(llama.ok());
  ASSERT_EQ(llama->size(), 2u);
  auto partial = store_->List("m/llama/ctx-2");
  ASSERT_TRUE(partial.ok());
  ASSERT_EQ(partial->size(), 1u);
  EXPECT_EQ(Must(store_->List("m/q")).size(), 1u);
  EXPECT_EQ(Must(store_->List("t")).size(), 1u);
  EXPECT_TRUE(Must(store_->List("nothing/here/")).empty());

  // Temporaries (a crashed Put's leftovers) and files no name could reach are not objects.
  std::ofstream(dir_.path() + "/m/.ctx-3~tmp.1.2") << "partial";
  std::ofstream(dir_.path() + "/m/has space") << "x";
  EXPECT_EQ(Must(store_->List("")).size(), 4u);

  // A name cannot be both an object and a folder here.
  Status s = store_->Put("top/child", Bytes("x"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  s = store_->Put("m", Bytes("x"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(store_->Get("m").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(Must(store_->Exists("m")));
}

TEST_F(DirStoreTest, EveryEntryPointValidatesNames) {
  for (const std::string& bad :
       std::vector<std::string>{"../escape", "/etc/passwd", "a//b", "a/./b", "", "a/"}) {
    for (const Status& s : {store_->Put(bad, Bytes("x")), store_->Get(bad).status(),
                            store_->Exists(bad).status(), store_->Delete(bad)}) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_EQ(DetailOf(s), StoreError::kInvalidName) << bad;
    }
  }
  EXPECT_EQ(store_->List("../").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(fs::path(dir_.path()).parent_path() / "escape"));
}

TEST_F(DirStoreTest, ConcurrentPutsOfOneNameEachPublishAWholeObject) {
  std::vector<std::vector<uint8_t>> versions;
  for (int t = 0; t < 4; ++t) versions.emplace_back(200000 + t * 1000, static_cast<uint8_t>('a' + t));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) EXPECT_TRUE(store_->Put("same", versions[t]).ok());
    });
  }
  bool reader_ok = true;
  std::thread reader([&] {
    for (int i = 0; i < 200; ++i) {
      auto got = store_->Get("same");
      if (!got.ok()) continue;  // not written yet
      if (std::find(versions.begin(), versions.end(), *got) == versions.end()) reader_ok = false;
    }
  });
  for (auto& t : threads) t.join();
  reader.join();
  EXPECT_TRUE(reader_ok) << "a reader saw a mix of two Puts or a partial one";
  EXPECT_EQ(Must(store_->List("")).size(), 1u);
}

// kill -9 at a random moment of a Put loop: the object is always one whole version, and List never shows
// anything but the one object.
TEST_F(DirStoreTest, KillDuringPutLeavesAWholeObject) {
  const std::vector<uint8_t> a(1 << 20, 'a'), b(4 << 20, 'b');
  ASSERT_TRUE(store_->Put("obj", a).ok());
  for (int round = 0; round < 8; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int i = 0;; ++i) (void)store_->Put("obj", i % 2 ? a : b);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + round * 7));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    auto got = store_->Get("obj");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == a || *got == b) << "round " << round << ": " << got->size() << " bytes";
    auto listed = store_->List("");
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name, "obj");
  }
}

// ---- The S3 XML reader ----

TEST(S3Xml, ListPageWithEverythingS3Sends) {
  const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment <Contents> that is not one -->
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>p/</Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents>
    <Key>p/a&amp;b</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>12</Size>
    <Owner><ID>x</ID><DisplayName>Key</DisplayName></Owner><StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents><Key><![CDATA[p/<cdata>]]></Key><Size> 18446744073709551615 </Size></Contents>
  <Contents><Size>0</Size><Key>p/&#65;&#x42;&#xe9;</Key></Contents>
  <CommonPrefixes><Prefix>p/dir/</Prefix></CommonPrefixes>
  <NextContinuationToken>1/abc+def=&amp;</NextContinuationToken>
  <ContinuationToken/>
</ListBucketResult>)";
  auto page = ParseListObjectsV2(xml);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 3u);
  EXPECT_EQ(page->objects[0].name, "p/a&b");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[1].name, "p/<cdata>");
  EXPECT_EQ(page->objects[1].size, UINT64_MAX);
  EXPECT_EQ(page->objects[2].name, "p/AB\xc3\xa9");
  EXPECT_EQ(page->objects[2].size, 0u);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1/abc+def=&");
}

TEST(S3Xml, EmptyAndLastPages) {
  auto empty = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><IsTruncated>false</"
      "IsTruncated>"
      "</ListBucketResult>");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->objects.empty());
  EXPECT_FALSE(empty->truncated);
  // Namespace prefixes and attributes are ignored.
  auto ns = ParseListObjectsV2(
      "<s3:ListBucketResult xmlns:s3='x'><s3:IsTruncated>false</s3:IsTruncated><s3:Contents id=\"1\">"
      "<s3:Key>k</s3:Key><s3:Size>5</s3:Size></s3:Contents></s3:ListBucketResult>");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  ASSERT_EQ(ns->objects.size(), 1u);
  EXPECT_EQ(ns->objects[0].name, "k");
}

TEST(S3Xml, RefusesWhatItCannotTrust) {
  const std::vector<std::string> bad = {
      "",
      "<html><body>502 Bad Gateway</body></html>",
      "<Error><Code>AccessDenied</Code></Error>",
      "<ListBucketResult><IsTruncated>false</IsTruncated>",                     // cut short
      "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResul",    // cut inside a tag
      "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",  // not a boolean
      "<ListBucketResult></ListBucketResult>",                                  // no IsTruncated
      "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",   // no token to go on with
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Key></Contents></"
      "ListBucketResult>",
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents></"
      "ListBucketResult>",
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>-1</Size></Contents>"
      "</ListBucketResult>",
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>99999999999999999999</"
      "Size>"
      "</Contents></ListBucketResult>",
      "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Size></Contents></"
      "ListBucketResult>",
      "<ListBucketResult><!-- unterminated comment </ListBucketResult>",
      "<ListBucketResult><Key><![CDATA[x</Key></ListBucketResult>",
  };
  for (const std::string& xml : bad) {
    auto page = ParseListObjectsV2(xml);
    ASSERT_FALSE(page.ok()) << xml;
    EXPECT_EQ(DetailOf(page.status()), StoreError::kBadResponse) << xml;
  }
}

TEST(S3Xml, ErrorBodies) {
  auto e = ParseS3Error(
      "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
      "calculated does not match</Message><StringToSign>AWS4-HMAC-SHA256...</StringToSign></Error>");
  EXPECT_EQ(e.code, "SignatureDoesNotMatch");
  EXPECT_EQ(e.message, "The request signature we calculated does not match");
  EXPECT_EQ(ParseS3Error("").code, "");
  EXPECT_EQ(ParseS3Error("<html>oops").code, "");
  EXPECT_EQ(ParseS3Error("<Other><Code>X</Code></Other>").code, "");
  EXPECT_EQ(ParseS3Error("<Error><Message>" + std::string(1000, 'm') + "</Message></Error>").message.size(),
            300u);
}

TEST(S3Xml, Unescape) {
  EXPECT_EQ(XmlUnescape("a &lt;b&gt; &amp;&quot;&apos;"), "a <b> &\"'");
  EXPECT_EQ(XmlUnescape("&#47;&#x2F;&#X2f;"), "///");
  EXPECT_EQ(XmlUnescape("&#x1F600;"), "\xf0\x9f\x98\x80");
  // Not entities: kept as written.
  EXPECT_EQ(XmlUnescape("AT&T &bogus; &#xZZ; &#0; & end &"), "AT&T &bogus; &#xZZ; &#0; & end &");
}

TEST(S3Url, UriEncodeLeavesOnlyUnreserved) {
  EXPECT_EQ(UriEncode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(UriEncode("p/a b+c=d&e"), "p%2Fa%20b%2Bc%3Dd%26e");
  EXPECT_EQ(UriEncode("\xc3\xa9"), "%C3%A9");
}

}  // namespace
}  // namespace llamay::store
