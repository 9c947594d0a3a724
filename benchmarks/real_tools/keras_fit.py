"""A real Keras 3 script (`model.fit(verbose=2)`), to run through `zeus-kfp run` where Keras is installed: its
lines are Keras's own, not an imitation (tests/ux/user_scripts/keras_fit.py imitates them without Keras).

    pip install keras   # Keras 3; KERAS_BACKEND=torch uses the torch already installed
    .venv/bin/zeus-kfp run --command "{python} benchmarks/real_tools/keras_fit.py --batch-size {batch_size}" \\
        --metric-pattern "(val_accuracy): ([0-9.]+)" --spec benchmarks/real_tools/keras.json -r 1
"""

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # after the backend is chosen
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()
rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("int32")
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2, activation="softmax")]
)
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x[:1536], y[:1536], batch_size=args.batch_size, epochs=8, validation_data=(x[1536:], y[1536:]), verbose=2)
