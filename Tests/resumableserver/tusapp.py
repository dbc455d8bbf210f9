"""A tus 1.0 server nobody here wrote: tuspyserver (PyPI) mounted in a FastAPI app, for the
integration tests. Run: python3 -m uvicorn tusapp:app --app-dir Tests/resumableserver --port N
with AFT_TUS_DIR naming the directory of the uploads."""

import os

from fastapi import FastAPI
from tuspyserver import create_tus_router

app = FastAPI()
app.include_router(create_tus_router(prefix="files", files_dir=os.environ.get("AFT_TUS_DIR", "/tmp/aft-tus")))
