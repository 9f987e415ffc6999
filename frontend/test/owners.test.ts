import { test } from "node:test";
import assert from "node:assert/strict";
import { EVERYONE, byOwner, ownerLabel, owners, showsOwners } from "../src/owners";

const runs = [
  { id: "r3", owner: "bob" }, { id: "r2", owner: null }, { id: "r1", owner: "ada" }, { id: "r0", owner: "bob" },
];
const teacher = { name: null, teacher: true, reads_all: true };
const student = { name: "ada", teacher: false, reads_all: false };

test("owners: each student once, sorted, the admin's runs left out", () => {
  assert.deepEqual(owners(runs), ["ada", "bob"]);
  assert.deepEqual(owners([]), []);
});

test("byOwner keeps the order and only the chosen student's runs; EVERYONE keeps all", () => {
  assert.deepEqual(byOwner(runs, "bob").map((r) => r.id), ["r3", "r0"]);
  assert.deepEqual(byOwner(runs, EVERYONE).map((r) => r.id), ["r3", "r2", "r1", "r0"]);
  assert.deepEqual(byOwner(runs, "nobody"), []);
});

test("owners are shown to a token that reads all, once a run has an owner; never to a student", () => {
  assert.equal(showsOwners(teacher, runs), true);
  assert.equal(showsOwners(student, runs), false);
  assert.equal(showsOwners(teacher, [{ owner: null }]), false); // a server without accounts
  assert.equal(showsOwners(null, runs), false); // an older server without /api/me
  assert.equal(ownerLabel({ owner: null }), "teacher");
  assert.equal(ownerLabel({ owner: "ada" }), "ada");
});
