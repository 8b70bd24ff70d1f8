"""A migration once released never changes (issue 46's break-it review: a move rewrote
module paths in the comments of eight applied migrations, and every existing database
refused to start: `grandbo.migrations` checks each applied migration's SHA-256, comments
included). Each released migration's checksum is pinned here; a new migration adds its
line, an edited one fails this test before it fails a deployment."""

from __future__ import annotations

from grandbo.migrations import available_migrations

RELEASED = {
    1: "a640c595b7cd6de6967972e755d8e27461221e259bda22c2e7a269c05725dbe9",
    2: "05ac5efe7bdd3a1c342f3a872de4ab4da4ae11e901810e9cf6e346736ea51869",
    3: "dadb62a3b05d7d408ec690b2919b899d1b45c358a1bbc31160c07869165f6d7e",
    4: "888fe0646b71ba5091105d03ec9778470e420e99358bde2d80907d42604f6d0d",
    5: "cec54a6fb4c36b737164275f1e592f33bad074480cb6061dc6e6a576849ecf52",
    6: "e2aebb3d641c2b8a0279a016a742edff63fc6be8b0fd41b9b5283cbdcc882360",
    7: "1ca5d951591c135a10d4cf9ab1a52fe401c742c8378a7a5c4043ab21fc743ed2",
    8: "e7a4091634e9cd3f0e109e7e379a1d69217cec3a702a0b48f69e3a7c4c77c67b",
    9: "c6e2b3ea69022d4ad8fe851adf633aa15fbea9535eb7f34b58c318feffdc7585",
    10: "7aec579934f702fbc19eac0069d3bb3a07e295e57ff3f5a9bb5f398666c2974c",
    11: "149b0df1ae073530e99be08b8ef3384d35fb5637fe5780bfcec492270d12195a",
    12: "5a4eed40407146fe83d31a6ddac02c70ec0da0f9d795bdddc2efed2708adf0a2",
    13: "701f9b494b5b2708a04757a28e6bc66104ce026f42ba90fae097255fb72c77e2",
    14: "f55671a09dc46a54856b996828c99b5ff485e15504a7357fa610e26595cad60a",
    15: "e74e4fc641bd34e91b088eb04aaf261fdfa53df64eef56cf097d60c6c926f3bd",
    16: "edcf89933d4b8e0279b554f70743dece160d9c50c0d8e33c6a2442377f6e89cd",
    17: "f4e3c40f0a3c2eca55c97875bc68c042d9bb9b2e3e73b7a0fb6f57cb57a35a16",
    18: "a79f675b0ab4a215999502cd8c458a7db7619d1bf5b91f61eb85018d1fcd1288",
    19: "e099bc0178d77ae6fc115a95d6d0d1072312f2594464fd981599e52b119c99db",
    20: "c1e1c52e1ce9017ad2950b061251ad2b4c841948c3dacd0a622e0834b06e3f49",
    21: "d056c7aa7fcaef70bcc1142eba9156b28c4a4591b0b38d67efc6237f7ee2d9d4",
    22: "b2e8a06c7895f73d78ed755f62be6071d7fae3f2dc977cc9eab66b1eb01d9173",
    23: "b61d44b41a3db0828c47dfbff935d7456c56d17a0a7c30e44edcad877f7c3a4e",
    24: "daf72eb19aa652a3a540a017a54324006395bf55931513d662aa6c76bc3e53ac",
    25: "63bb6537d18df7a12c1cc23b5a66c33113f2f04942503c1b3dbf404622cbaf97",
    26: "555cc745ebca82055de31c9af98ce8b74a08af6d9f801c4835115a27df55b848",
    27: "4bbb243925c00de6220a24fe7f8a53de19609a46623037d6fb41248b6535beb0",
    28: "dab35e2912f833205a7b68a8c8c56187e45390ea92d5bf783450cd345853a1c6",
    29: "c2c8c006741fb5de1ce378a9e62b8550967906b23d5df5f6b4c0f3addda90680",
    30: "8b7985a596cb6b5ad5412aba55bac94898a0aff778e6a1804c9b11872548a593",
    31: "45b770ae3567a3ddbf3c35fae676cab9aa34f70f91369d4bd60a33d9432855c0",
    32: "bfd3df2a7c30189ba8bcc581c8185767cd9c054841c09cd214ef8c2b6f714d65",
    33: "00b857d38de0efb265af00ff12949a624579df2353c6050da7ee808fdc1c71c6",
    34: "20451be214ed9ff5fb9bd2f4564626bee676a81bca972f3540c409ea0c5a2088",
    35: "b65c51c30128d01bc98e2595a0e9ed5fb04c5f183d71331c361c45759b2d9a17",
    36: "76059858dc2db2651bb1f034557aa27b7beb741b422a86a2bc1be017e6643a77",
    37: "d4434d64c63f21c6c6cb2aa8f6356ccadc38cb25cc298dc13c1f511b1704df5b",
    38: "58994b445b7ed56dc1bac2dbf2e1ddbe792b5a3d4cf71b517b0fe12c82ef6e83",
    39: "9debd45cc0b7408f063f6d008fcd9e6ec28a01fc70f7c5a3bc0634c8121e4ab3",
    40: "b09ea9bc238dfa655c5cb0303174220fb388844c56f8586799d298fd8f22436f",
    41: "2ab68c0f5f9509ca28d0e56c3908cd9a5478e5e49425842c583c5b7e6921babb",
    42: "5d876b25e7c0829cc068f7b6755a2ccab9ab5f0306e024977782754e0eccd162",
    43: "db64e85ca7eb0bea8f2d32669350d74a69eb99194e0cc89d7611de94cb17610c",
}


def test_no_released_migration_has_changed() -> None:
    found = {m.version: m for m in available_migrations()}
    changed = [
        f"{version:04d}_{found[version].name}"
        for version, digest in RELEASED.items()
        if version in found and found[version].checksum != digest
    ]
    assert changed == [], f"edited after release (add a new migration instead): {changed}"
    assert set(RELEASED) <= set(found), "a released migration is gone"


def test_every_migration_is_pinned() -> None:
    unpinned = sorted(set(m.version for m in available_migrations()) - set(RELEASED))
    assert unpinned == [], f"pin the new migration's checksum in RELEASED: {unpinned}"
