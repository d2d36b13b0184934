// An independent S3 client for the store tests (src/store/s3_store_test.cc): the AWS SDK for JavaScript
// lists and reads what llamay wrote, and writes an object for llamay to read.
//
// Usage: node s3_client_check.mjs ENDPOINT BUCKET PREFIX ACCESS_KEY SECRET_KEY [WRITE_KEY WRITE_TEXT]
// Prints one line per object under PREFIX: "OBJ <key> <size> <sha256 hex of the bytes read>", then
// writes WRITE_KEY (if given) and prints "WROTE <key>". Exits non-zero on any error. A session token, if
// the server wants one, comes in S3_CHECK_SESSION_TOKEN.
import crypto from 'node:crypto';
import { S3Client, ListObjectsV2Command, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';

const [endpoint, bucket, prefix, accessKeyId, secretAccessKey, writeKey, writeText] = process.argv.slice(2);
const client = new S3Client({
  endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId, secretAccessKey, sessionToken: process.env.S3_CHECK_SESSION_TOKEN },
  maxAttempts: 1,
});
let token;
do {
  const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: 2 }));
  for (const o of page.Contents ?? []) {
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key }));
    const bytes = Buffer.from(await got.Body.transformToByteArray());
    console.log(`OBJ ${o.Key} ${o.Size} ${crypto.createHash('sha256').update(bytes).digest('hex')}`);
  }
  token = page.IsTruncated ? page.NextContinuationToken : undefined;
} while (token);
if (writeKey) {
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: writeKey, Body: writeText }));
  console.log(`WROTE ${writeKey}`);
}
